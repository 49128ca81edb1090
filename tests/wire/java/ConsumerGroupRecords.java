// Kafka's own bytes for the consumer group records that tests/wire/test_consumer_group_records.py
// builds the same way: one line per record, "key-hex value-hex".
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupCurrentMemberAssignmentValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMemberMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMemberValue;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataKey;
import org.apache.kafka.coordinator.group.generated.ConsumerGroupTargetAssignmentMetadataValue;

public class ConsumerGroupRecords {
    static final Uuid FOO = new Uuid(0x0102030405060708L, 0x090a0b0c0d0e0f10L);
    static final Uuid BAR = new Uuid(-2L, 42L);

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    static void line(ApiMessage key, ApiMessage value) {
        System.out.println(hex(MessageUtil.toCoordinatorTypePrefixedBytes(key)) + " "
            + hex(MessageUtil.toVersionPrefixedBytes((short) 0, value)));
    }

    static ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions tp(Uuid id, List<Integer> ps, List<Integer> epochs) {
        return new ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions().setTopicId(id).setPartitions(ps)
            .setAssignmentEpochs(epochs);
    }

    public static void main(String[] args) {
        line(new ConsumerGroupMetadataKey().setGroupId("grp"), new ConsumerGroupMetadataValue().setEpoch(7));
        line(new ConsumerGroupMetadataKey().setGroupId("grp"),
             new ConsumerGroupMetadataValue().setEpoch(8).setMetadataHash(-123456789L));
        line(new ConsumerGroupMemberMetadataKey().setGroupId("grp").setMemberId("m-1"),
             new ConsumerGroupMemberMetadataValue().setInstanceId(null).setRackId("r1").setClientId("cli")
                 .setClientHost("/127.0.0.1").setSubscribedTopicNames(Arrays.asList("bar", "foo"))
                 .setSubscribedTopicRegex(null).setRebalanceTimeoutMs(45000).setServerAssignor("uniform"));
        line(new ConsumerGroupMemberMetadataKey().setGroupId("grp").setMemberId("m-2"),
             new ConsumerGroupMemberMetadataValue().setInstanceId("i-2").setRackId(null).setClientId("")
                 .setClientHost("h").setSubscribedTopicNames(List.of()).setSubscribedTopicRegex("fo.*")
                 .setClassicMemberMetadata(new ConsumerGroupMemberMetadataValue.ClassicMemberMetadata()
                     .setSessionTimeoutMs(10000).setSupportedProtocols(List.of(
                         new ConsumerGroupMemberMetadataValue.ClassicProtocol().setName("range")
                             .setMetadata(new byte[] {0, 1, 2})))));
        line(new ConsumerGroupTargetAssignmentMetadataKey().setGroupId("grp"),
             new ConsumerGroupTargetAssignmentMetadataValue().setAssignmentEpoch(8).setAssignmentTimestamp(1700000000000L));
        line(new ConsumerGroupTargetAssignmentMemberKey().setGroupId("grp").setMemberId("m-1"),
             new ConsumerGroupTargetAssignmentMemberValue().setTopicPartitions(List.of(
                 new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(FOO).setPartitions(List.of(0, 2)),
                 new ConsumerGroupTargetAssignmentMemberValue.TopicPartition().setTopicId(BAR).setPartitions(List.of()))));
        line(new ConsumerGroupCurrentMemberAssignmentKey().setGroupId("grp").setMemberId("m-1"),
             new ConsumerGroupCurrentMemberAssignmentValue().setMemberEpoch(8).setPreviousMemberEpoch(7)
                 .setState((byte) 1)
                 .setAssignedPartitions(List.of(tp(FOO, List.of(0), List.of(7)), tp(BAR, List.of(1, 3), null)))
                 .setPartitionsPendingRevocation(List.of(tp(FOO, List.of(2), null))));
    }
}
