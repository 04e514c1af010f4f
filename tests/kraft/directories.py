"""Log directories (KIP-858) as the tests with real brokers read them: each broker directory's id
from its ``meta.properties``, and every partition's directories as a raftmeta voter's committed
log leaves them (read back with ``raftmeta log dump``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

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


def committed_directories(node_dir: str, high_watermark: int) -> dict[tuple[str, int], list[str]]:
    """Every partition's directories (topic id in Kafka's form, partition) as the records below
    ``high_watermark`` in the voter's segments leave them."""
    assert not list(Path(node_dir).rglob("*.checkpoint")), "no snapshot: the segments hold every record"
    dump = subprocess.run(
        raftmeta_command("log", "dump", "--data-dir", node_dir, "--output", "json"),
        capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-4000:]
    directories: dict[tuple[str, int], list[str]] = {}
    for batch in json.loads(dump.stdout)["batches"]:
        for record in batch.get("records", []):
            if record["offset"] >= high_watermark or record.get("type") not in ("partition", "partition_change"):
                continue
            fields = record["fields"]
            key = (fields["topic_id"], fields["partition_id"])
            if record["type"] == "partition":
                directories[key] = fields["directories"]
            elif "directories" in fields:
                directories[key] = fields["directories"]["ids"]
    return directories


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
