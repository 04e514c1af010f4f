"""Log directories (KIP-858) as the tests with real brokers read them: each broker directory's id
from its ``meta.properties``, and every partition's directories as a raftmeta voter's committed
log leaves them (read back with ``raftmeta log dump``)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raftmeta.api.ids import uuid_to_str
from raftmeta.kraft.cluster import KraftNode
from raftmeta.local.python_command import raftmeta_command
from raftmeta.storage.meta_properties import read_meta_properties

DUMP_TIMEOUT_S = 120.0


def directory_ids(broker: KraftNode) -> dict[str, Path]:
    """The broker's log directories by id (Kafka's form): each ``data*`` folder it was given."""
    found = {}
    for folder in sorted(Path(broker.node_dir).glob("data*")):
        meta = read_meta_properties(folder)
        assert meta is not None and meta.directory_id, f"broker {broker.node_id}: {folder} has no directory id"
        found[uuid_to_str(meta.directory_id)] = folder
    return found


@dataclass
class CommittedPartition:
    """A partition as the committed records leave it (broker ids; directories in Kafka's form)."""

    replicas: list[int]
    isr: list[int]
    leader: int
    directories: list[str]


def committed_records(node_dir: str, high_watermark: int) -> list[dict[str, Any]]:
    """The records below ``high_watermark`` in the voter's segments, as ``raftmeta log dump``
    shows them (``offset``, ``type``, ``fields``)."""
    assert not list(Path(node_dir).rglob("*.checkpoint")), "no snapshot: the segments hold every record"
    dump = subprocess.run(
        raftmeta_command("log", "dump", "--data-dir", node_dir, "--output", "json"),
        capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-4000:]
    return [
        record
        for batch in json.loads(dump.stdout)["batches"]
        for record in batch.get("records", [])
        if record["offset"] < high_watermark
    ]


def committed_partitions(node_dir: str, high_watermark: int) -> dict[tuple[str, int], CommittedPartition]:
    """Every partition (topic id in Kafka's form, partition) as the committed records leave it."""
    partitions: dict[tuple[str, int], CommittedPartition] = {}
    for record in committed_records(node_dir, high_watermark):
        fields = record.get("fields", {})
        key = (fields.get("topic_id"), fields.get("partition_id", 0))
        if record.get("type") == "partition":
            partitions[key] = CommittedPartition(
                fields["replicas"], fields["isr"], fields["leader"], fields["directories"]
            )
        elif record.get("type") == "partition_change":
            part = partitions[key]
            for name in ("replicas", "isr", "directories"):
                if name in fields:
                    setattr(part, name, fields[name]["ids"])
            part.leader = fields.get("leader", part.leader)
    return partitions


def committed_directories(node_dir: str, high_watermark: int) -> dict[tuple[str, int], list[str]]:
    """Every partition's directories (topic id in Kafka's form, partition) as the records below
    ``high_watermark`` in the voter's segments leave them."""
    return {key: part.directories for key, part in committed_partitions(node_dir, high_watermark).items()}


def committed_log_dirs(node_dir: str, high_watermark: int) -> dict[int, list[str]]:
    """Every registered broker's log directories as the committed records leave them: its
    registration's, then each BrokerLogDirsChangeRecord's (an empty one changes nothing, as Kafka
    replays it)."""
    log_dirs: dict[int, list[str]] = {}
    for record in committed_records(node_dir, high_watermark):
        fields = record.get("fields", {})
        if record.get("type") == "register_broker" or (
            record.get("type") == "broker_log_dirs_change" and fields["log_dirs"]
        ):
            log_dirs[fields["broker_id"]] = fields["log_dirs"]
        elif record.get("type") == "unregister_broker":
            log_dirs.pop(fields["broker_id"], None)
    return log_dirs


# What a 4.4 broker's AssignmentsManager logs when its controller refuses AssignReplicasToDirs
# (KIP-858) or a partition of it -- it retries forever, a line each time -- and what it logs
# when it sends some.
ASSIGNMENT_FAILURES = ("assignments failed; global error", "handleResponse: error assigning")
LOST_CONNECTION = ("Disconnected", "Timeout")  # a controller killed or paused: retried, not refused


def refused_assignments(broker: KraftNode) -> list[str]:
    """The lines of the broker's logs (every run's) where its controller refused an assignment."""
    refused = []
    for path in sorted(Path(broker.node_dir).glob("server.log*")):
        for line in path.read_text(errors="replace").splitlines():
            if any(f in line for f in ASSIGNMENT_FAILURES) and not any(c in line for c in LOST_CONNECTION):
                refused.append(f"{path.name}: {line}")
    return refused
