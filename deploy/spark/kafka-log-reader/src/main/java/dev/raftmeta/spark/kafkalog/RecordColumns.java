package dev.raftmeta.spark.kafkalog;

import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.common.message.LeaderChangeMessage;
import org.apache.kafka.common.message.VotersRecord;
import org.apache.kafka.common.metadata.BrokerRegistrationChangeRecord;
import org.apache.kafka.common.metadata.ConfigRecord;
import org.apache.kafka.common.metadata.FenceBrokerRecord;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.RemoveTopicRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.metadata.UnfenceBrokerRecord;
import org.apache.kafka.common.metadata.UnregisterBrokerRecord;
import org.apache.kafka.common.protocol.ApiMessage;

/** The columns the verify checks read, from a message Kafka's own code decoded. */
final class RecordColumns {
  private RecordColumns() {}

  static void fill(LogRows.Row row, ApiMessage message) {
    if (message instanceof PartitionRecord p) {
      row.set("topic_id", p.topicId().toString())
          .set("partition_id", p.partitionId())
          .set("replicas", p.replicas())
          .set("isr", p.isr())
          .set("adding_replicas", p.addingReplicas())
          .set("removing_replicas", p.removingReplicas())
          .set("elr", p.eligibleLeaderReplicas())
          .set("leader", p.leader())
          .set("leader_epoch", p.leaderEpoch())
          .set("partition_epoch", p.partitionEpoch());
    } else if (message instanceof PartitionChangeRecord c) {
      // Null lists and leader -2 are Kafka's "unchanged"; a change record carries no epochs.
      row.set("topic_id", c.topicId().toString())
          .set("partition_id", c.partitionId())
          .set("replicas", c.replicas())
          .set("isr", c.isr())
          .set("adding_replicas", c.addingReplicas())
          .set("removing_replicas", c.removingReplicas())
          .set("elr", c.eligibleLeaderReplicas())
          .set("leader", c.leader());
    } else if (message instanceof TopicRecord t) {
      row.set("topic_id", t.topicId().toString()).set("topic_name", t.name());
    } else if (message instanceof RemoveTopicRecord r) {
      row.set("topic_id", r.topicId().toString());
    } else if (message instanceof RegisterBrokerRecord b) {
      row.set("broker_id", b.brokerId()).set("rack", b.rack()).set("fenced", b.fenced());
    } else if (message instanceof UnregisterBrokerRecord u) {
      row.set("broker_id", u.brokerId());
    } else if (message instanceof FenceBrokerRecord f) {
      row.set("broker_id", f.id()).set("fenced", true);
    } else if (message instanceof UnfenceBrokerRecord u) {
      row.set("broker_id", u.id()).set("fenced", false);
    } else if (message instanceof BrokerRegistrationChangeRecord c) {
      // Fenced: 1 fences, -1 unfences, 0 leaves it as it is.
      row.set("broker_id", c.brokerId()).set("fenced", c.fenced() == 0 ? null : c.fenced() > 0);
    } else if (message instanceof ConfigRecord c) {
      row.set("config_resource_type", (int) c.resourceType())
          .set("config_resource_name", c.resourceName())
          .set("config_name", c.name())
          .set("config_value", c.value());
    } else if (message instanceof LeaderChangeMessage l) {
      row.set("leader", l.leaderId()).set("voters", ids(l.voters().stream().map(v -> v.voterId())));
    } else if (message instanceof VotersRecord v) {
      row.set("voters", ids(v.voters().stream().map(VotersRecord.Voter::voterId)));
    }
  }

  private static List<Integer> ids(java.util.stream.Stream<Integer> ids) {
    return ids.collect(Collectors.toList());
  }
}
