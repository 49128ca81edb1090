import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.StringDeserializer;

/** A Kafka 4.4 share consumer (KIP-932) in explicit acknowledgement mode: a record whose value
 *  starts with "release" is released at its first delivery and accepted at its next, one starting
 *  with "reject" is rejected, every other one accepted. Prints "ACK partition offset type count"
 *  per acknowledgement and "DONE partition offset" or "FAILED partition offset" as the broker
 *  confirms or refuses it; stops once it has seen {@code quiet} seconds without a record after at
 *  least one record, or after {@code limit} seconds. */
public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int quiet = Integer.parseInt(args[3]), limit = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        // small acquisitions (KIP-1206's record_limit), so that members sharing a partition share its records
        p.put("share.acquire.mode", "record_limit");
        p.put("max.poll.records", "20");
        p.put("client.id", "share-" + group + "-" + ProcessHandle.current().pid());
        long start = System.currentTimeMillis(), last = 0;
        boolean seen = false;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.setAcknowledgementCommitCallback((offsets, exception) -> offsets.forEach((tp, done) -> {
                for (Long o : done)
                    System.out.println((exception == null ? "DONE " : "FAILED ") + tp.partition() + " " + o);
            }));
            c.subscribe(List.of(topic));
            while (System.currentTimeMillis() - start < limit * 1000L) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    short count = r.deliveryCount().orElse((short) 0);
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (r.value().startsWith("release") && count == 1) type = AcknowledgeType.RELEASE;
                    else if (r.value().startsWith("reject")) type = AcknowledgeType.REJECT;
                    c.acknowledge(r, type);
                    System.out.println("ACK " + r.partition() + " " + r.offset() + " " + type + " " + count);
                }
                if (!records.isEmpty()) {
                    c.commitSync();
                    seen = true;
                    last = System.currentTimeMillis();
                } else if (seen && System.currentTimeMillis() - last > quiet * 1000L) {
                    break;
                }
            }
        }
        System.out.flush();
    }
}
