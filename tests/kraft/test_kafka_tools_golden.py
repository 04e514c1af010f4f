"""Kafka's own tools and Java Admin against raftmeta, compared live with a real KRaft cluster.

The same script (tests/kraft/golden_script.py for the tools, raftmeta/kraft/java/AdminScript.java
for Admin) runs against the session's KRaft cluster (3 controllers, brokers 0..2 in racks
rack-a..rack-c) and against a raftmeta quorum with 3 simulated brokers in the same racks. Every
field of every step must agree after normalizing (tests/kraft/golden.py), or be one of the known
differences below, each listed with its reason in docs/kafka-protocol.md ("Kafka's own tools").
A known difference that stops occurring fails the test too, so the list stays true.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from raftmeta.controller.configs import TOPIC_CONFIGS
from raftmeta.kraft.cluster import KraftCluster
from raftmeta.kraft.tool_batch import ToolRun, run_admin_script, run_tools
from raftmeta.local import quorum as local_quorum
from tests.kraft.golden import (
    ABSENT,
    Difference,
    KnownDifference,
    Side,
    admin_view,
    compare,
    judge,
    report,
    tool_view,
)
from tests.kraft.golden_script import tool_script

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(900)]

FAST_NODE_ARGS = ["--fetch-timeout-ms", "1000", "--election-timeout-ms", "500", "--session-timeout-ms", "4500"]


def _config_raftmeta_does_not_know(difference: Difference) -> bool:
    name = difference.field.removeprefix("result.").removeprefix("configs.")
    return difference.raftmeta == ABSENT and name not in TOPIC_CONFIGS


def _only_kraft_has_the_cluster_min_isr(difference: Difference) -> bool:
    kraft, raftmeta = str(difference.kraft), str(difference.raftmeta)
    if difference.field.endswith("min.insync.replicas"):
        return "DYNAMIC_DEFAULT_BROKER_CONFIG" in kraft
    return re.sub(r"min\.insync\.replicas=1,?", "", kraft).rstrip() == raftmeta.rstrip()


# Each entry: docs/kafka-protocol.md, "Kafka's own tools", says the same.
KNOWN: tuple[KnownDifference, ...] = (
    KnownDifference(
        "KRaft's cluster-wide min.insync.replicas",
        "a KRaft cluster with eligible leader replicas (KIP-966) sets min.insync.replicas=1 cluster-wide "
        "(DYNAMIC_DEFAULT_BROKER_CONFIG), so it shows among a topic's non-default configs; raftmeta has "
        "no broker-level configs and shows the topic default",
        "*",
        when=_only_kraft_has_the_cluster_min_isr,
    ),
    KnownDifference(
        "topic configs raftmeta does not know",
        "raftmeta validates and stores the topic configs of raftmeta.controller.configs.TOPIC_CONFIGS; "
        "Kafka's other topic configs (flush, remote storage, compression levels, ...) configure the data "
        "plane raftmeta does not have, so it neither lists nor accepts them",
        "Admin *",
        when=_config_raftmeta_does_not_know,
    ),
    KnownDifference(
        "CreateTopics(validate_only) topic id",
        "Kafka answers a validate-only CreateTopics with a fresh topic id that names nothing; raftmeta "
        "answers the zero id, since no topic was made",
        "Admin createTopics(*validateOnly)",
        ("result.topicId",),
    ),
    KnownDifference(
        "no feature levels",
        "raftmeta has no Kafka feature flags (metadata.version, kraft.version, ...): ApiVersions "
        "advertises none, so kafka-features describe lists nothing",
        "FeatureCommand describe",
        ("stdout[*]",),
    ),
    KnownDifference(
        "quorum voters' listener",
        "KRaft's voters are reached on their CONTROLLER listener; raftmeta's voters are its nodes, "
        "reached on their Kafka listener (PLAINTEXT)",
        "MetadataQuorumCommand describe --status",
        ("stdout[6]",),
        when=lambda d: str(d.kraft).replace("CONTROLLER://", "PLAINTEXT://") == d.raftmeta,
    ),
    KnownDifference(
        "brokers are not quorum observers",
        "KRaft's brokers fetch the metadata log and show as observers; raftmeta's simulated brokers "
        "heartbeat the controller and do not replicate the log",
        "*",
        ("stdout[7]", "stdout[4]", "stdout[5]", "stdout[6]", "result.observers*"),
        when=lambda d: d.step.startswith(("MetadataQuorumCommand", "Admin describeMetadataQuorum")),
    ),
    KnownDifference(
        "no config synonyms",
        "raftmeta answers DescribeConfigs without synonyms (it has no broker configs they would name)",
        "ConfigCommand * --describe",
        ("stdout[*]",),
        when=lambda d: re.sub(r"synonyms=\{.*\}", "synonyms={}", str(d.kraft)) == d.raftmeta,
    ),
    KnownDifference(
        "no broker configs",
        "raftmeta's simulated brokers have no configs: DescribeConfigs for a broker answers an empty list",
        "Admin describeConfigs(broker 1)",
    ),
    KnownDifference(
        "replication factor message",
        "Kafka 4.4's message also mentions brokers whose log directories are all cordoned (KIP-1066); "
        "raftmeta's brokers have no log directories",
        "*",
        ("stdout[0]", "message"),
        when=lambda d: (
            str(d.kraft).replace(" or some brokers have all their log directories cordoned", "") == d.raftmeta
        ),
    ),
    KnownDifference(
        "manual assignment errors name the partition",
        "raftmeta's message for a manual assignment naming an unregistered broker says which topic and "
        "partition (the rest is Kafka's wording); Kafka's does not",
        "*",
        ("stdout[0]", "message"),
        when=lambda d: re.sub(r"(Topic \S+: )?partition \d+: ", "", str(d.raftmeta)) == d.kraft,
    ),
    KnownDifference(
        "ElectLeaders on a partition whose preferred leader already leads",
        "raftmeta's ELECTION_NOT_NEEDED message names the partition and its leader; Kafka's is the "
        "error's generic text",
        "Admin electLeaders(preferred, already leading)",
        ("result.*.message",),
    ),
)


@pytest.fixture(scope="module")
def raftmeta_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_quorum.LocalQuorum]:
    directory = tmp_path_factory.mktemp("golden") / "q"
    started = local_quorum.up(
        directory, nodes=3, brokers=3, racks=3, node_args=FAST_NODE_ARGS, heartbeat_interval_ms=200, kafka=True
    )
    try:
        yield started
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(directory))


def _transcript(bootstrap: str, directory: Path) -> tuple[list[ToolRun], list[dict[str, Any]]]:
    return run_tools(tool_script(bootstrap, directory)), run_admin_script(bootstrap)


def _step_name(run: ToolRun) -> str:
    """The tool and its arguments, without the bootstrap servers and the input files' paths."""
    args = [a for i, a in enumerate(run.args) if a != "--bootstrap-server" and run.args[i - 1] != "--bootstrap-server"]
    return " ".join([run.tool.rsplit(".", 1)[-1], *(Path(a).name if a.startswith("/") else a for a in args)])


def test_kafkas_tools_and_admin_see_raftmeta_as_they_see_kraft(
    kraft_cluster: KraftCluster, raftmeta_quorum: local_quorum.LocalQuorum, tmp_path: Path
) -> None:
    assert raftmeta_quorum.kafka_bootstrap_servers is not None
    # Both sides at once: each is mostly waiting on its own cluster.
    with ThreadPoolExecutor(2) as pool:
        on_kraft = pool.submit(_transcript, kraft_cluster.bootstrap_servers, tmp_path / "kraft")
        on_raftmeta = pool.submit(_transcript, raftmeta_quorum.kafka_bootstrap_servers, tmp_path / "raftmeta")
        (kraft_tools, kraft_admin), (raftmeta_tools, raftmeta_admin) = on_kraft.result(), on_raftmeta.result()

    kraft_side = Side(kraft_cluster.cluster_id, tuple(n.node_id for n in kraft_cluster.controllers))
    raftmeta_side = Side(raftmeta_quorum.cluster_id, tuple(n.id for n in raftmeta_quorum.nodes))
    steps = [_step_name(r) for r in kraft_tools] + [f"Admin {line['call']}" for line in kraft_admin]
    assert [_step_name(r) for r in raftmeta_tools] == steps[: len(kraft_tools)]
    assert [line["call"] for line in raftmeta_admin] == [line["call"] for line in kraft_admin]
    differences = compare(
        steps,
        [tool_view(r, kraft_side) for r in kraft_tools] + [admin_view(a, kraft_side) for a in kraft_admin],
        [tool_view(r, raftmeta_side) for r in raftmeta_tools] + [admin_view(a, raftmeta_side) for a in raftmeta_admin],
    )
    unknown, stale = judge(differences, KNOWN)
    if unknown or stale:
        # Both sides' raw answers, for reading a failure beside the normalized diff.
        transcripts = tmp_path / "transcripts.json"
        sides = {"kraft": (kraft_tools, kraft_admin), "raftmeta": (raftmeta_tools, raftmeta_admin)}
        raw = {name: {"tools": [asdict(r) for r in tools], "admin": admin} for name, (tools, admin) in sides.items()}
        transcripts.write_text(json.dumps(raw, indent=1))
        pytest.fail(f"{report(unknown, stale)}\n(raw answers of both sides: {transcripts})", pytrace=False)
