// The Java KafkaConsumer with group.protocol=consumer (KIP-848) against kcoord: three consumers
// in one group read a topic, committing synchronously after each batch; then a new consumer of
// the group gets every partition and reads nothing.
// usage: java ConsumerProtocol BOOTSTRAP TOPIC GROUP COUNT PARTITIONS
// Prints one JSON line: {"consumed":N,"unique":N,"owned":[...],"late_assigned":N,"late_read":N}
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ConsumerProtocol {
    static KafkaConsumer<String, String> consumer(String bs, String group, String name) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bs);
        p.put("group.id", group);
        p.put("group.protocol", "consumer");
        p.put("client.id", name);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]), partitions = Integer.parseInt(args[4]);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<String> all = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean(false);
        List<Set<Integer>> owned = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Set<Integer> mine = ConcurrentHashMap.newKeySet();
            owned.add(mine);
            String name = "java-m" + i;
            Thread t = new Thread(() -> {
                try (KafkaConsumer<String, String> c = consumer(bs, group, name)) {
                    c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                            ps.forEach(tp -> mine.remove(tp.partition()));
                        }
                        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                            ps.forEach(tp -> mine.add(tp.partition()));
                        }
                    });
                    while (!stop.get()) {
                        ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : records) {
                            String key = r.partition() + ":" + r.offset();
                            seen.add(key);
                            all.add(key);
                        }
                        if (!records.isEmpty()) c.commitSync();
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        long deadline = System.currentTimeMillis() + 90_000;
        while (System.currentTimeMillis() < deadline) {
            int spread = 0;
            for (Set<Integer> s : owned) spread += s.isEmpty() ? 0 : 1;
            if (seen.size() >= count && spread == 3) break;
            Thread.sleep(100);
        }
        List<Integer> ownedCounts = new ArrayList<>();
        for (Set<Integer> s : owned) ownedCounts.add(s.size());
        stop.set(true);
        for (Thread t : threads) t.join(30_000);

        int lateRead = 0, lateAssigned = 0;
        try (KafkaConsumer<String, String> c = consumer(bs, group, "java-late")) {
            c.subscribe(List.of(topic));
            long end = System.currentTimeMillis() + 30_000;
            while (c.assignment().size() < partitions && System.currentTimeMillis() < end) {
                lateRead += c.poll(Duration.ofMillis(200)).count();
            }
            lateAssigned = c.assignment().size();
            long quiet = System.currentTimeMillis() + 3_000;
            while (System.currentTimeMillis() < quiet) lateRead += c.poll(Duration.ofMillis(200)).count();
        }
        System.out.println("{\"consumed\":" + all.size() + ",\"unique\":" + seen.size() + ",\"owned\":" + ownedCounts
                + ",\"late_assigned\":" + lateAssigned + ",\"late_read\":" + lateRead + "}");
    }
}
