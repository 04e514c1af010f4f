// One fixed sequence of Java Admin (Kafka's own AdminClient) calls against a cluster, each call's
// outcome printed as one JSON line: {"call": ..., "ok": true, "result": {...}} or
// {"call": ..., "ok": false, "error": "<exception class>", "message": "..."}. The same sequence
// runs against a real KRaft cluster and against raftmeta, and Python compares the two transcripts.
//
// Topic names are fixed ("admin-*") and every placement is a manual assignment, so both sides
// are asked exactly the same thing. Run with:
//   java -cp '<kafka jars>/*' AdminScript.java <bootstrap servers>
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

public class AdminScript {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String A = "admin-a";
    // How long a reassignment may take to finish (the listing is polled half a second apart).
    static final int REASSIGNMENT_POLLS = 120;
    // How long a broker may take to learn a committed change from the metadata log.
    static final int PROPAGATION_POLLS = 20;

    interface Call {
        Object run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            script(admin);
        }
    }

    static void script(Admin admin) throws Exception {
        Map<Integer, List<Integer>> assignment = Map.of(0, List.of(0, 1, 2), 1, List.of(1, 2, 0));
        NewTopic a = new NewTopic(A, assignment).configs(Map.of("retention.ms", "3600000"));
        ConfigResource topicA = new ConfigResource(ConfigResource.Type.TOPIC, A);

        step("createTopics(validateOnly)", () -> created(admin.createTopics(List.of(a), new CreateTopicsOptions().validateOnly(true)), A));
        step("createTopics", () -> created(admin.createTopics(List.of(a)), A));
        step("createTopics(existing)", () -> created(admin.createTopics(List.of(a)), A));
        step("createTopics(replicationFactor 4)", () -> created(
                admin.createTopics(List.of(new NewTopic("admin-bad", 1, (short) 4))), "admin-bad"));
        step("createTopics(bad config)", () -> created(
                admin.createTopics(List.of(new NewTopic("admin-bad", Map.of(0, List.of(0))).configs(Map.of("retention.ms", "soon")))),
                "admin-bad"));
        step("createTopics(defaults, validateOnly)", () -> created(
                admin.createTopics(List.of(new NewTopic("admin-defaults", Optional.empty(), Optional.empty())),
                        new CreateTopicsOptions().validateOnly(true)),
                "admin-defaults"));
        step("listTopics", () -> until(() -> scriptTopics(admin), topics -> topics.contains(A)));
        step("describeTopics", () -> until(() -> described(admin, A), topic -> partitionCount(topic) == 2));
        step("describeCluster", () -> cluster(admin.describeCluster()));
        step("describeConfigs(topic)", () -> configs(admin, topicA, false));
        // Broker 1: a KRaft broker, and a raftmeta node (whose broker configs are an empty list).
        step("describeConfigs(broker 1)", () -> configs(admin, new ConfigResource(ConfigResource.Type.BROKER, "1"), true));
        step("incrementalAlterConfigs(set)", () -> altered(admin, topicA, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET))));
        step("describeConfigs(topic, set)", () -> until(() -> configs(admin, topicA, true),
                changed -> "7200000".equals(value(changed, "retention.ms"))));
        step("incrementalAlterConfigs(delete, append)", () -> altered(admin, topicA, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.APPEND))));
        step("describeConfigs(topic, deleted)", () -> until(() -> configs(admin, topicA, true),
                changed -> value(changed, "retention.ms") == null));
        step("incrementalAlterConfigs(unknown config)", () -> altered(admin, topicA, List.of(
                new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET))));
        step("incrementalAlterConfigs(bad value)", () -> altered(admin, topicA, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET))));
        step("createPartitions(validateOnly)", () -> partitions(admin, NewPartitions.increaseTo(4), true));
        step("createPartitions", () -> partitions(admin, NewPartitions.increaseTo(3, List.of(List.of(2, 0, 1))), false));
        step("createPartitions(fewer)", () -> partitions(admin, NewPartitions.increaseTo(2), false));
        step("createPartitions(unknown broker)", () -> partitions(admin, NewPartitions.increaseTo(4, List.of(List.of(0, 1, 7))), false));
        step("electLeaders(preferred, already leading)", () -> elected(admin, Set.of(new TopicPartition(A, 0), new TopicPartition(A, 1))));
        TopicPartition a0 = new TopicPartition(A, 0);
        step("alterPartitionReassignments", () -> reassigned(admin, Map.of(a0, Optional.of(new NewPartitionReassignment(List.of(2, 0, 1))))));
        step("alterPartitionReassignments(unknown partition)", () -> reassigned(admin,
                Map.of(new TopicPartition(A, 9), Optional.of(new NewPartitionReassignment(List.of(0, 1, 2))))));
        step("alterPartitionReassignments(unknown broker)", () -> reassigned(admin,
                Map.of(new TopicPartition(A, 1), Optional.of(new NewPartitionReassignment(List.of(0, 1, 7))))));
        step("listPartitionReassignments(until done)", () -> reassignmentsUntilDone(admin));
        step("describeTopics(reassigned)", () -> until(() -> described(admin, A),
                topic -> List.of(2, 0, 1).equals(partition(topic, 0).get("replicas"))));
        step("electLeaders(preferred)", () -> elected(admin, Set.of(a0)));
        step("describeTopics(elected)", () -> until(() -> described(admin, A),
                topic -> Integer.valueOf(2).equals(partition(topic, 0).get("leader"))));
        step("electLeaders(unknown partition)", () -> elected(admin, Set.of(new TopicPartition(A, 9))));
        step("describeMetadataQuorum", () -> quorum(admin.describeMetadataQuorum().quorumInfo().get()));
        step("deleteTopics", () -> deleted(admin, List.of(A)));
        step("deleteTopics(unknown)", () -> deleted(admin, List.of("admin-missing")));
        step("listTopics(after delete)", () -> until(() -> scriptTopics(admin), List::isEmpty));
    }

    interface Read<T> {
        T run() throws Exception;
    }

    /**
     * {@code read}'s answer once {@code done} holds, or its last answer after PROPAGATION_POLLS
     * tries: a broker answers reads from its copy of the metadata log, which learns what the
     * controller committed a moment later (the same on both sides: raftmeta's reads are current).
     */
    static <T> T until(Read<T> read, java.util.function.Predicate<T> done) throws Exception {
        T answer = read.run();
        for (int poll = 1; poll < PROPAGATION_POLLS && !done.test(answer); poll++) {
            Thread.sleep(500);
            answer = read.run();
        }
        return answer;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> partition(Map<String, Object> topic, int index) {
        return ((List<Map<String, Object>>) topic.get("partitions")).get(index);
    }

    @SuppressWarnings("unchecked")
    static int partitionCount(Map<String, Object> topic) {
        return ((List<Object>) topic.get("partitions")).size();
    }

    @SuppressWarnings("unchecked")
    static Object value(Map<String, Object> configs, String name) {
        Map<String, Object> entry = (Map<String, Object>) configs.get(name);
        return entry == null ? null : entry.get("value");
    }

    /** The topics this script made (a shared cluster may hold others), by name. */
    static List<String> scriptTopics(Admin admin) throws Exception {
        return admin.listTopics().names().get().stream().filter(n -> n.startsWith("admin-")).sorted().collect(Collectors.toList());
    }

    /** Prints one line: the call and its result, or the exception it ended with. */
    static void step(String call, Call body) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("call", call);
        try {
            Object result = body.run();
            line.put("ok", true);
            line.put("result", result);
        } catch (ExecutionException failed) {
            Throwable cause = failed.getCause();
            line.put("ok", false);
            line.put("error", cause.getClass().getName());
            line.put("message", cause.getMessage());
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }

    static Object created(CreateTopicsResult result, String name) throws Exception {
        result.all().get();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("numPartitions", result.numPartitions(name).get());
        out.put("replicationFactor", result.replicationFactor(name).get());
        out.put("topicId", String.valueOf(result.topicId(name).get()));
        Config config = result.config(name).get();
        out.put("configs", entries(config.entries(), false));
        return out;
    }

    /** Config entries sorted by name; {@code changedOnly}: only those not at their default. */
    static Map<String, Object> entries(Collection<ConfigEntry> entries, boolean changedOnly) {
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry entry : entries) {
            if (changedOnly && entry.isDefault()) {
                continue;
            }
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("value", entry.value());
            fields.put("source", String.valueOf(entry.source()));
            fields.put("isDefault", entry.isDefault());
            fields.put("isReadOnly", entry.isReadOnly());
            fields.put("isSensitive", entry.isSensitive());
            fields.put("type", String.valueOf(entry.type()));
            out.put(entry.name(), fields);
        }
        return out;
    }

    static Map<String, Object> configs(Admin admin, ConfigResource resource, boolean changedOnly) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        return entries(config.entries(), changedOnly);
    }

    static Object altered(Admin admin, ConfigResource resource, List<AlterConfigOp> ops) throws Exception {
        admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        return Map.of();
    }

    static Map<String, Object> described(Admin admin, String name) throws Exception {
        TopicDescription topic = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", topic.name());
        out.put("internal", topic.isInternal());
        out.put("topicId", String.valueOf(topic.topicId()));
        List<Object> partitions = new ArrayList<>();
        for (TopicPartitionInfo p : topic.partitions()) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("partition", p.partition());
            fields.put("leader", p.leader() == null ? null : p.leader().id());
            fields.put("replicas", ids(p.replicas()));
            fields.put("isr", ids(p.isr()));
            fields.put("elr", ids(p.elr()));
            fields.put("lastKnownElr", ids(p.lastKnownElr()));
            partitions.add(fields);
        }
        out.put("partitions", partitions);
        return out;
    }

    static List<Integer> ids(List<Node> nodes) {
        return nodes == null ? null : nodes.stream().map(Node::id).collect(Collectors.toList());
    }

    static Object cluster(DescribeClusterResult result) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("clusterId", result.clusterId().get());
        out.put("controller", result.controller().get().id());
        List<Object> nodes = new ArrayList<>();
        for (Node node : result.nodes().get()) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("id", node.id());
            fields.put("host", node.host());
            fields.put("port", node.port());
            fields.put("rack", node.rack());
            nodes.add(fields);
        }
        out.put("nodes", nodes);
        return out;
    }

    static Object partitions(Admin admin, NewPartitions change, boolean validateOnly) throws Exception {
        admin.createPartitions(Map.of(A, change), new CreatePartitionsOptions().validateOnly(validateOnly)).all().get();
        return Map.of();
    }

    /** Each partition's election outcome: null when elected, else the error's class and message. */
    static Object elected(Admin admin, Set<TopicPartition> partitions) throws Exception {
        Map<TopicPartition, Optional<Throwable>> outcome = admin.electLeaders(ElectionType.PREFERRED, partitions).partitions().get();
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, Optional<Throwable>> entry : outcome.entrySet()) {
            out.put(entry.getKey().toString(), entry.getValue()
                    .map(e -> (Object) Map.of("error", e.getClass().getName(), "message", String.valueOf(e.getMessage())))
                    .orElse(null));
        }
        return out;
    }

    static Object reassigned(Admin admin, Map<TopicPartition, Optional<NewPartitionReassignment>> moves) throws Exception {
        admin.alterPartitionReassignments(moves).all().get();
        return Map.of();
    }

    /** The reassignments in progress, polled until none is (Kafka finishes them in the background). */
    static Object reassignmentsUntilDone(Admin admin) throws Exception {
        Map<TopicPartition, PartitionReassignment> ongoing = Map.of();
        for (int poll = 0; poll < REASSIGNMENT_POLLS; poll++) {
            ongoing = admin.listPartitionReassignments().reassignments().get();
            if (ongoing.isEmpty()) {
                break;
            }
            Thread.sleep(500);
        }
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<TopicPartition, PartitionReassignment> entry : ongoing.entrySet()) {
            out.put(entry.getKey().toString(), Map.of(
                    "replicas", entry.getValue().replicas(),
                    "adding", entry.getValue().addingReplicas(),
                    "removing", entry.getValue().removingReplicas()));
        }
        return out;
    }

    static Object quorum(QuorumInfo info) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("leaderId", info.leaderId());
        out.put("leaderEpoch", info.leaderEpoch());
        out.put("highWatermark", info.highWatermark());
        out.put("voters", replicas(info.voters()));
        out.put("observers", replicas(info.observers()));
        out.put("nodes", new TreeMap<>(info.nodes()).keySet());
        return out;
    }

    static List<Object> replicas(List<QuorumInfo.ReplicaState> states) {
        List<Object> out = new ArrayList<>();
        for (QuorumInfo.ReplicaState state : states) {
            Map<String, Object> fields = new LinkedHashMap<>();
            fields.put("replicaId", state.replicaId());
            fields.put("replicaDirectoryId", String.valueOf(state.replicaDirectoryId()));
            fields.put("logEndOffset", state.logEndOffset());
            fields.put("lastFetchTimestamp", state.lastFetchTimestamp().isPresent() ? state.lastFetchTimestamp().getAsLong() : null);
            fields.put("lastCaughtUpTimestamp", state.lastCaughtUpTimestamp().isPresent() ? state.lastCaughtUpTimestamp().getAsLong() : null);
            out.add(fields);
        }
        return out;
    }

    static Object deleted(Admin admin, List<String> names) throws Exception {
        admin.deleteTopics(names).all().get();
        return Map.of();
    }
}
