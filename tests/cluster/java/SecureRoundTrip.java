// The Java client over TLS / SASL: a KafkaProducer writes COUNT records, a KafkaConsumer in GROUP
// reads them, committing synchronously after each batch; the security settings come from a
// properties file (security.protocol, ssl.*, sasl.*), as a user's client.properties would.
// usage: java SecureRoundTrip BOOTSTRAP TOPIC GROUP COUNT PROPERTIES
// Prints one JSON line: {"consumed":N,"unique":N,"committed":N}
import java.io.FileReader;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

public class SecureRoundTrip {
    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        Properties security = new Properties();
        try (FileReader in = new FileReader(args[4])) { security.load(in); }

        Properties pp = new Properties();
        pp.putAll(security);
        pp.put("bootstrap.servers", bs);
        pp.put("acks", "all");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) p.send(new ProducerRecord<>(topic, i % 3, null, "m" + i));
            p.flush();
        }

        Properties cp = new Properties();
        cp.putAll(security);
        cp.put("bootstrap.servers", bs);
        cp.put("group.id", group);
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        Set<String> unique = new HashSet<>();
        int consumed = 0;
        long committed = 0;
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 90_000;
            while (unique.size() < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    consumed++;
                    unique.add(r.value());
                }
                if (!records.isEmpty()) c.commitSync();
            }
            Set<TopicPartition> parts = new HashSet<>();
            for (int i = 0; i < 3; i++) parts.add(new TopicPartition(topic, i));
            for (OffsetAndMetadata om : c.committed(parts).values()) if (om != null) committed += om.offset();
        }
        System.out.println("{\"consumed\":" + consumed + ",\"unique\":" + unique.size() + ",\"committed\":" + committed + "}");
    }
}
