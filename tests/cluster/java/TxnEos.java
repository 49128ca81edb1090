// The Java client's exactly-once loop against kcoord: a read_committed KafkaConsumer, a
// transactional KafkaProducer with sendOffsetsToTransaction, the first round aborted and read
// again; then the output read back read_committed, and a zombie producer fenced.
// usage: java TxnEos BOOTSTRAP IN_TOPIC OUT_TOPIC COUNT
// Prints one JSON line: {"consumed":N,"output":N,"unique":N,"aborted":N,"fenced":bool}
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnEos {
    static Properties consumerProps(String bs, String group) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("group.id", group);
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return p;
    }

    static KafkaProducer<String, String> producer(String bs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("transactional.id", "java-eos-1");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0], in = args[1], out = args[2];
        int count = Integer.parseInt(args[3]);
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(bs, "java-eos"));
        KafkaProducer<String, String> producer = producer(bs);
        producer.initTransactions();
        consumer.subscribe(List.of(in));
        int consumed = 0, rounds = 0, aborted = 0;
        long deadline = System.currentTimeMillis() + 90_000;
        while (consumed < count && System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
            if (records.isEmpty()) continue;
            rounds++;
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : records) {
                producer.send(new ProducerRecord<>(out, r.key(), "J:" + r.value()));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
            if (rounds == 1) {
                producer.abortTransaction();
                aborted += records.count();
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(consumer.assignment());
                for (TopicPartition tp : consumer.assignment()) {
                    OffsetAndMetadata om = committed.get(tp);
                    if (om == null) consumer.seekToBeginning(List.of(tp)); else consumer.seek(tp, om.offset());
                }
                continue;
            }
            producer.commitTransaction();
            consumed += records.count();
        }
        consumer.close();

        // A second producer with the same transactional id fences the first.
        KafkaProducer<String, String> successor = producer(bs);
        successor.initTransactions();
        boolean fenced = false;
        try {
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(out, "zombie", "zombie")).get();
            producer.commitTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            fenced = true;
        } catch (java.util.concurrent.ExecutionException e) {
            fenced = e.getCause() instanceof ProducerFencedException || e.getCause() instanceof InvalidProducerEpochException;
        } catch (KafkaException e) {
            fenced = e instanceof ProducerFencedException || e.getCause() instanceof ProducerFencedException;
        }
        producer.close(Duration.ofSeconds(5));
        successor.close(Duration.ofSeconds(5));

        KafkaConsumer<String, String> reader = new KafkaConsumer<>(consumerProps(bs, "java-eos-reader"));
        List<TopicPartition> parts = new ArrayList<>();
        reader.partitionsFor(out).forEach(p -> parts.add(new TopicPartition(out, p.partition())));
        reader.assign(parts);
        reader.seekToBeginning(parts);
        List<String> output = new ArrayList<>();
        long until = System.currentTimeMillis() + 20_000, settle = -1;
        while (System.currentTimeMillis() < until && (settle < 0 || System.currentTimeMillis() < settle)) {
            for (ConsumerRecord<String, String> r : reader.poll(Duration.ofMillis(200))) output.add(r.value());
            if (settle < 0 && output.size() >= count) settle = System.currentTimeMillis() + 2000;
        }
        reader.close();
        System.out.println("{\"consumed\":" + consumed + ",\"output\":" + output.size() + ",\"unique\":"
                + new HashSet<>(output).size() + ",\"aborted\":" + aborted + ",\"fenced\":" + fenced + "}");
    }
}
