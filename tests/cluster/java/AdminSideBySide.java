import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java Admin's calls on one cluster, each outcome printed as one line "step<TAB>value", with
 * what a server chooses (ids, sizes, which node leads) left out, so that two servers' outputs can
 * be compared line by line (tests/cluster/test_admin_side_by_side.py).
 */
public class AdminSideBySide {
    static final String TOPIC = "sbs";

    static void out(String step, Object value) {
        System.out.println(step + "\t" + value);
    }

    static String error(Throwable t) {
        Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
        return "error:" + c.getClass().getSimpleName();
    }

    static Map<String, String> configs(Admin admin, String topic) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, String> m = new TreeMap<>();
        for (ConfigEntry e : c.entries()) {
            m.put(e.name(), e.value() + "|" + e.source() + "|" + e.isReadOnly() + "|" + e.isSensitive() + "|" + e.type());
        }
        return m;
    }

    /** The topic's configs once {@code key}'s value starts with {@code want}: a Kafka broker applies an
     * alteration when the metadata reaches it, a moment after the controller acknowledged it. */
    static Map<String, String> settled(Admin admin, String topic, String key, String want) throws Exception {
        Map<String, String> m = configs(admin, topic);
        for (int i = 0; i < 50 && !String.valueOf(m.get(key)).startsWith(want); i++) {
            Thread.sleep(200);
            m = configs(admin, topic);
        }
        return m;
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 3).configs(Map.of("retention.ms", "3600000"))))
                .all().get();
            Thread.sleep(2000);  // leaders elected everywhere
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (int i = 0; i < 20; i++) {
                    producer.send(new ProducerRecord<>(TOPIC, 0, "k" + i, "v" + i)).get();
                }
            }

            // describeConfigs
            Map<String, String> initial = configs(admin, TOPIC);
            for (Map.Entry<String, String> e : initial.entrySet()) {
                out("describeConfigs." + e.getKey(), e.getValue());
            }
            try {
                configs(admin, "no-such-topic");
                out("describeConfigs.unknown", "ok");
            } catch (ExecutionException e) {
                out("describeConfigs.unknown", error(e));
            }

            // incrementalAlterConfigs: SET, DELETE, APPEND, a bad value
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "64000"), AlterConfigOp.OpType.SET)))).all().get();
            Map<String, String> after = settled(admin, TOPIC, "max.message.bytes", "64000|");
            out("incrementalAlterConfigs.retention.ms", after.get("retention.ms"));
            out("incrementalAlterConfigs.max.message.bytes", after.get("max.message.bytes"));
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)))).all().get();
            after = settled(admin, TOPIC, "cleanup.policy", "delete,compact|");
            out("incrementalAlterConfigs.deleted.max.message.bytes", after.get("max.message.bytes"));
            out("incrementalAlterConfigs.appended.cleanup.policy", after.get("cleanup.policy"));
            try {
                admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
                out("incrementalAlterConfigs.bad", "ok");
            } catch (ExecutionException e) {
                out("incrementalAlterConfigs.bad", error(e));
            }

            // (the Admin's alterConfigs, the whole set replaced, was removed in Kafka 4.0: kafka-configs
            // and the Admin use incrementalAlterConfigs only)

            // createPartitions, describeTopics
            admin.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(4))).all().get();
            try {
                admin.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(2))).all().get();
                out("createPartitions.fewer", "ok");
            } catch (ExecutionException e) {
                out("createPartitions.fewer", error(e));
            }
            Thread.sleep(2000);
            TopicDescription d = admin.describeTopics(List.of(TOPIC)).allTopicNames().get().get(TOPIC);
            out("describeTopics.partitions", d.partitions().size());
            out("describeTopics.internal", d.isInternal());
            for (TopicPartitionInfo info : d.partitions()) {
                out("describeTopics.p" + info.partition(), "replicas=" + info.replicas().size() + " isr=" + info.isr().size()
                    + " leader=" + (info.leader() != null));
            }
            try {
                admin.describeTopics(List.of("no-such-topic")).allTopicNames().get();
                out("describeTopics.unknown", "ok");
            } catch (ExecutionException e) {
                out("describeTopics.unknown", error(e));
            }

            // deleteRecords
            TopicPartition tp0 = new TopicPartition(TOPIC, 0);
            out("deleteRecords.low",
                admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(5))).lowWatermarks().get(tp0).get().lowWatermark());
            try {
                admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(1000))).all().get();
                out("deleteRecords.past", "ok");
            } catch (ExecutionException e) {
                out("deleteRecords.past", error(e));
            }

            // describeCluster
            DescribeClusterResult c = admin.describeCluster();
            Collection<Node> nodes = c.nodes().get();
            out("describeCluster.nodes", nodes.size());
            out("describeCluster.controller", c.controller().get() != null);
            out("describeCluster.clusterId", c.clusterId().get() != null);

            // describeLogDirs: one directory a broker; the topic's partitions in it
            List<Integer> ids = new ArrayList<>();
            for (Node n : nodes) {
                ids.add(n.id());
            }
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(ids).allDescriptions().get();
            for (Map.Entry<Integer, Map<String, LogDirDescription>> e : dirs.entrySet()) {
                int topicParts = 0;
                boolean sized = true;
                for (LogDirDescription ld : e.getValue().values()) {
                    for (Map.Entry<TopicPartition, ReplicaInfo> ri : ld.replicaInfos().entrySet()) {
                        if (ri.getKey().topic().equals(TOPIC)) {
                            topicParts++;
                            sized &= ri.getValue().size() >= 0;
                        }
                    }
                }
                out("describeLogDirs.broker", "dirs=" + e.getValue().size() + " sbs-partitions=" + topicParts + " sized=" + sized);
            }

            // electLeaders (preferred)
            java.util.Set<TopicPartition> tps = new java.util.HashSet<>();
            for (int i = 0; i < 4; i++) {
                tps.add(new TopicPartition(TOPIC, i));
            }
            Map<TopicPartition, java.util.Optional<Throwable>> elected = admin.electLeaders(ElectionType.PREFERRED, tps)
                .partitions().get();
            Map<String, Integer> outcomes = new TreeMap<>();
            for (java.util.Optional<Throwable> t : elected.values()) {
                // which node leads before the call is the server's choice: done and not needed are one outcome
                String kind = t.isPresent() ? t.get().getClass().getSimpleName() : "ElectionNotNeededException";
                outcomes.merge(kind.equals("ElectionNotNeededException") ? "preferred-leads" : kind, 1, Integer::sum);
            }
            out("electLeaders.outcomes", outcomes);
            try {
                Map<TopicPartition, java.util.Optional<Throwable>> u = admin.electLeaders(ElectionType.PREFERRED,
                    java.util.Set.of(new TopicPartition("no-such-topic", 0))).partitions().get();
                java.util.Optional<Throwable> t = u.values().iterator().next();
                out("electLeaders.unknown", t.isPresent() ? "error:" + t.get().getClass().getSimpleName() : "ok");
            } catch (ExecutionException e) {
                out("electLeaders.unknown", error(e));
            }
        }
    }
}
