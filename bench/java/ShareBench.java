import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** A Kafka share consumer for ``kcoord bench share``: implicit acknowledgement (each poll accepts
 *  the records of the one before), prints "COUNT n" (records received so far) every 100 ms and
 *  once at the end; stops after {@code quiet} seconds without a record once it had some, or after
 *  {@code limit} seconds. */
public class ShareBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int quiet = Integer.parseInt(args[3]), limit = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long start = System.currentTimeMillis(), last = 0, printed = 0, count = 0;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            while (System.currentTimeMillis() - start < limit * 1000L) {
                ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(100));
                long now = System.currentTimeMillis();
                if (!records.isEmpty()) {
                    count += records.count();
                    last = now;
                } else if (count > 0 && now - last > quiet * 1000L) {
                    break;
                }
                if (now - printed >= 100) {
                    System.out.println("COUNT " + count);
                    System.out.flush();
                    printed = now;
                }
            }
            c.commitSync();
        }
        System.out.println("COUNT " + count);
        System.out.flush();
    }
}
