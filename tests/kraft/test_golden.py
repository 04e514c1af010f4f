"""The golden comparison's normalizer and differ (tests/kraft/golden.py), on recorded-shape inputs:
what may differ between two clusters is normalized away, nothing else is, and the known list is
held both ways (an unexplained difference and a known one that no longer occurs both fail)."""

from __future__ import annotations

from raftmeta.kraft.tool_batch import ToolRun
from raftmeta.kraft.tools import TOPIC_COMMAND
from tests.kraft.golden import (
    ABSENT,
    Difference,
    KnownDifference,
    Side,
    admin_view,
    compare,
    judge,
    normalize_text,
    report,
    tool_view,
)

KRAFT = Side("ebayoJqOSsGPlmY4na9KYg", (3001, 3002, 3003))
RAFTMETA = Side("7VXEtJNfQuiVI-_oJdeSng", (1, 2, 3))


def test_ids_addresses_timestamps_and_isr_order_are_normalized() -> None:
    kraft = normalize_text(
        "Cluster ID: ebayoJqOSsGPlmY4na9KYg\n"
        "Topic: t\tTopicId: 3bfioAnCSaaN3Eom2F0enQ\tPartitionCount: 1\n"
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 2,0\tIsr: 2,0\n"
        "LeaderId:               3002\nHighWatermark:          1819\n",
        KRAFT,
    )
    raftmeta = normalize_text(
        "Cluster ID: 7VXEtJNfQuiVI-_oJdeSng\n"
        "Topic: t\tTopicId: a14OHY5GSrKxUAH5tvtGEg\tPartitionCount: 1\n"
        "\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 2,0\tIsr: 0,2\n"
        "LeaderId:               1\nHighWatermark:          24\n",
        RAFTMETA,
    )
    assert kraft == raftmeta
    assert kraft[0] == "Cluster ID: <cluster-id>" and "Isr: 0,2" in kraft[2]


def test_what_is_not_normalized_still_differs() -> None:
    # Replica order is the placement: it must never be normalized away (only the ISR is a set).
    kraft = normalize_text("\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 2,0\tIsr: 2,0", KRAFT)
    raftmeta = normalize_text("\tTopic: t\tPartition: 0\tLeader: 0\tReplicas: 0,2\tIsr: 2,0", RAFTMETA)
    assert kraft != raftmeta


def test_a_tool_run_is_compared_line_by_line_with_its_exit_code() -> None:
    kraft = ToolRun(TOPIC_COMMAND, (), 0, "Created topic a.\n", "", 1)
    raftmeta = ToolRun(TOPIC_COMMAND, (), 1, "Error while executing topic command : boom\n", "", 1)
    differences = compare(["create a"], [tool_view(kraft, KRAFT)], [tool_view(raftmeta, RAFTMETA)])
    assert [(d.field, d.kraft, d.raftmeta) for d in differences] == [
        ("exit_code", 0, 1),
        ("stdout[0]", "Created topic a.", "Error while executing topic command : boom"),
    ]


def test_admin_answers_are_flattened_with_config_entries_kept_whole() -> None:
    entry = {"value": "delete", "source": "DEFAULT_CONFIG", "isDefault": True}
    line = {"call": "describeConfigs", "ok": True, "result": {"cleanup.policy": entry, "topicId": "x" * 22}}
    assert admin_view(line, KRAFT) == {"ok": True, "result.cleanup.policy": entry, "result.topicId": "<id>"}


def test_describe_clusters_controller_is_any_listed_broker_and_nothing_else() -> None:
    def line(controller: int) -> dict[str, object]:
        nodes = [{"id": b, "host": "h", "port": 9092 + b, "rack": f"rack-{b}"} for b in range(3)]
        return {"call": "describeCluster", "ok": True, "result": {"controller": controller, "nodes": nodes}}

    # KRaft names a random alive broker, raftmeta the one at the node asked: both are listed.
    kraft, raftmeta = admin_view(line(2), KRAFT), admin_view(line(0), RAFTMETA)
    assert kraft == raftmeta and kraft["result.controller"] == "<a listed broker>"
    assert admin_view(line(7), RAFTMETA)["result.controller"] == 7  # a broker not listed still differs


def test_judge_holds_the_known_list_both_ways() -> None:
    known = KnownDifference("wording", "why", "Admin *", ("message",), when=lambda d: "partition" in str(d.raftmeta))
    explained = Difference("Admin createPartitions", "message", "broker 7", "partition 3: broker 7")
    unexplained = Difference("Admin createPartitions", "ok", True, False)
    unknown, stale = judge([explained, unexplained], [known])
    assert (unknown, stale) == ([unexplained], [])
    unknown, stale = judge([], [known])
    assert (unknown, stale) == ([], ["wording"])
    assert "no longer occur" in report([], stale) and "1 differences" in report([unexplained], [])


def test_a_field_one_side_lacks_is_a_difference() -> None:
    (difference,) = compare(["s"], [{"a": 1, "b": 2}], [{"a": 1}])
    assert (difference.field, difference.kraft, difference.raftmeta) == ("b", 2, ABSENT)


def test_patterns_treat_brackets_literally() -> None:
    known = KnownDifference("k", "why", "FeatureCommand *", ("stdout[*]",))
    assert known.covers(Difference("FeatureCommand describe", "stdout[3]", "x", ABSENT))
    assert not known.covers(Difference("FeatureCommand describe", "stderr", "x", ABSENT))


def test_stack_traces_and_log_lines_are_not_the_answer() -> None:
    stderr = (
        "[2026-11-29 06:56:33,883] WARN [AdminClient clientId=adminclient-1] Connection to node -1 could not be "
        "established. (org.apache.kafka.clients.NetworkClient)\n"
        "Error while executing config command with args '--bootstrap-server 127.0.0.1:1,127.0.0.1:2'\n"
        "java.util.concurrent.ExecutionException: boom\n\tat org.apache.kafka.Foo.bar(Foo.java:1)\n"
    )
    assert normalize_text(stderr, KRAFT) == [
        "Error while executing config command with args '--bootstrap-server <address>'",
        "java.util.concurrent.ExecutionException: boom",
    ]


def test_the_reassignment_tools_random_proposal_is_compared_by_its_shape() -> None:
    # --generate's proposal is drawn by the tool (an unseeded Random): any distinct brokers agree;
    # the current assignment above it, and a proposal naming a broker twice, are compared as they are.
    def generate(current: str, proposed: str) -> list[str]:
        return normalize_text(
            "Current partition replica assignment\n"
            f'{{"version":1,"partitions":[{{"topic":"t","partition":0,"replicas":{current},"log_dirs":["/a","/b"]}}]}}\n'
            "\nProposed partition reassignment configuration\n"
            f'{{"version":1,"partitions":[{{"topic":"t","partition":0,"replicas":{proposed},"log_dirs":["any","any"]}}]}}\n',
            KRAFT,
        )

    assert generate("[0,1]", "[2,0]") == generate("[0,1]", "[0,1]")
    assert generate("[0,1]", "[2,0]") != generate("[1,2]", "[2,0]")
    assert generate("[0,1]", "[2,0]") != generate("[0,1]", "[2,0,1]")
    assert generate("[0,1]", "[2,0]") != generate("[0,1]", "[2,2]")
