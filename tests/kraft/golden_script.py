"""The scripted sequence run against a real KRaft cluster and against raftmeta: Kafka's own tools,
with fixed topic names (``golden-*``) and manual replica assignments wherever Kafka would place
at random, over brokers 0..2 in racks rack-a..rack-c on both sides."""

from __future__ import annotations

import json
from pathlib import Path

from raftmeta.kraft.tool_batch import (
    CLUSTER_TOOL,
    CONFIG_COMMAND,
    FEATURE_COMMAND,
    LEADER_ELECTION_COMMAND,
    REASSIGN_PARTITIONS_COMMAND,
    ToolInvocation,
)
from raftmeta.kraft.tools import METADATA_QUORUM_COMMAND, TOPIC_COMMAND

TOPIC_PREFIX = "golden-"
# golden-r's partition 0 moves from [0, 1] to [2, 0]: its leader (0) stays in the replicas, so
# after the move the preferred leader (2) is not leading and a preferred election has work to do.
# A topic of its own, so that what the reassignment tool cannot do on raftmeta (docs/kafka-protocol.md)
# does not change what the other steps see.
REASSIGNMENT = {"version": 1, "partitions": [{"topic": "golden-r", "partition": 0, "replicas": [2, 0]}]}
TOPICS_TO_MOVE = {"version": 1, "topics": [{"topic": "golden-r"}]}
# How long --verify may report the move in progress (half a second apart).
VERIFY_ATTEMPTS = 120
# How long a broker may take to learn a committed change from the metadata log (half a second
# apart): milliseconds on KRaft; on raftmeta the listener reads the controller itself.
PROPAGATION_ATTEMPTS = 10


def write_inputs(directory: Path) -> tuple[Path, Path]:
    """The JSON files the reassignment tool reads: (reassignment, topics to move)."""
    directory.mkdir(parents=True, exist_ok=True)
    reassignment = directory / "reassignment.json"
    reassignment.write_text(json.dumps(REASSIGNMENT))
    topics = directory / "topics-to-move.json"
    topics.write_text(json.dumps(TOPICS_TO_MOVE))
    return reassignment, topics


def tool_script(bootstrap: str, directory: Path) -> list[ToolInvocation]:
    reassignment, topics = write_inputs(directory)
    server = ("--bootstrap-server", bootstrap)

    def topic_command(*args: str, until: str | None = None) -> ToolInvocation:
        # A read waits (``until``) for what the call before it committed: brokers answer from their
        # copy of the metadata log, which learns it a moment later.
        attempts = PROPAGATION_ATTEMPTS if until else 1
        return ToolInvocation(TOPIC_COMMAND, (*server, *args), until=until, attempts=attempts)

    def config_command(*args: str, until: str | None = None) -> ToolInvocation:
        attempts = PROPAGATION_ATTEMPTS if until else 1
        return ToolInvocation(
            CONFIG_COMMAND, (*server, "--entity-type", "topics", *args), until=until, attempts=attempts
        )

    def reassign(*args: str, until: str | None = None, attempts: int = VERIFY_ATTEMPTS) -> ToolInvocation:
        attempts = attempts if until else 1
        return ToolInvocation(REASSIGN_PARTITIONS_COMMAND, (*server, *args), until=until, attempts=attempts)

    def elect(*args: str) -> ToolInvocation:
        return ToolInvocation(LEADER_ELECTION_COMMAND, (*server, "--election-type", "preferred", *args))

    return [
        ToolInvocation(CLUSTER_TOOL, ("cluster-id", *server)),
        ToolInvocation(FEATURE_COMMAND, (*server, "describe")),
        ToolInvocation(METADATA_QUORUM_COMMAND, (*server, "describe", "--status")),
        ToolInvocation(METADATA_QUORUM_COMMAND, (*server, "describe", "--replication")),
        topic_command(
            "--create",
            "--topic",
            "golden-a",
            "--replica-assignment",
            "0:1:2,1:2:0,2:0:1",
            "--config",
            "retention.ms=3600000",
        ),
        topic_command("--create", "--topic", "golden-a", "--replica-assignment", "0:1:2"),
        topic_command("--create", "--topic", "golden-a", "--replica-assignment", "0:1:2", "--if-not-exists"),
        topic_command("--create", "--topic", "golden-bad", "--partitions", "1", "--replication-factor", "4"),
        topic_command("--create", "--topic", "golden-bad", "--replica-assignment", "0:7"),
        topic_command("--create", "--topic", "golden-b", "--replica-assignment", "0:1,1:2"),
        topic_command("--list", "--topic", "golden-.*", until=r"golden-a\ngolden-b"),
        topic_command("--describe", "--topic", "golden-a", until="PartitionCount: 3"),
        topic_command("--alter", "--topic", "golden-b", "--partitions", "3", "--replica-assignment", "0:1,1:2,2:0"),
        topic_command("--alter", "--topic", "golden-b", "--partitions", "2"),
        topic_command("--describe", "--topic", "golden-b", until="PartitionCount: 3"),
        topic_command("--describe", "--topic", "golden-missing"),
        config_command(
            "--entity-name", "golden-a", "--alter", "--add-config", "cleanup.policy=compact,retention.ms=7200000"
        ),
        config_command("--entity-name", "golden-a", "--describe", until="retention.ms=7200000"),
        config_command("--entity-name", "golden-a", "--alter", "--delete-config", "retention.ms"),
        config_command("--entity-name", "golden-a", "--describe", until=r"\A(?![\s\S]*retention\.ms=)"),
        config_command("--entity-name", "golden-a", "--alter", "--add-config", "no.such.config=1"),
        config_command("--entity-name", "golden-a", "--alter", "--add-config", "retention.ms=soon"),
        elect("--topic", "golden-b", "--partition", "0"),
        elect("--topic", "golden-missing", "--partition", "0"),
        topic_command("--create", "--topic", "golden-r", "--replica-assignment", "0:1"),
        # --generate reads golden-r from a broker, which may not have learned it yet.
        reassign(
            "--generate",
            "--topics-to-move-json-file",
            str(topics),
            "--broker-list",
            "0,1,2",
            until="Proposed partition reassignment configuration",
            attempts=PROPAGATION_ATTEMPTS,
        ),
        reassign("--execute", "--reassignment-json-file", str(reassignment)),
        # --preserve-throttles: none were set, and clearing them asks every broker id for its
        # configs, which on raftmeta waits out Admin's timeout for broker 0 (not a node there).
        reassign(
            "--verify",
            "--reassignment-json-file",
            str(reassignment),
            "--preserve-throttles",
            # Either answer is final; only "is still in progress" is waited out.
            until=r"golden-r-0 is completed|no active reassignment of partition golden-r-0",
        ),
        topic_command("--describe", "--topic", "golden-r", until=r"Partition: 0\tLeader: 0\tReplicas: 2,0"),
        elect("--topic", "golden-r", "--partition", "0"),
        topic_command("--describe", "--topic", "golden-r", until=r"Partition: 0\tLeader: 2"),
        topic_command("--delete", "--topic", "golden-a"),
        topic_command("--delete", "--topic", "golden-b"),
        topic_command("--delete", "--topic", "golden-r"),
        topic_command("--delete", "--topic", "golden-missing"),
        topic_command("--list", "--topic", "golden-.*", until=r"\A\s*\z"),
    ]
