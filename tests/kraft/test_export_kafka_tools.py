"""Kafka reads raftmeta (issue 41, deliverable 3): a raftmeta quorum's data dir, after creates, a
partition change, a delete and a broker fence, exported with ``raftmeta log export --format
kafka``, is read by Kafka's own tools without an error --

- ``kafka-dump-log --cluster-metadata-decoder`` (the pinned 4.4.0) decodes every batch of every
  segment and snapshot, each record as the Kafka type the raftmeta record at that offset maps to;
- ``kafka-metadata-shell`` loads the newest snapshot and shows the topics, partitions, ISRs,
  leaders and brokers that raftmeta's own dump of the same snapshot holds, and that describe
  showed before the quorum stopped;

-- and ``raftmeta log dump`` of the exported dir shows the native dir's records, offset for
offset. The shell's fault detector is itself proven on a snapshot it cannot load.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from raftmeta.cli.brokers import _fleet_call
from raftmeta.cli.main import cli
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.kraft.dump_log import dump_log_segments, parse_dump
from raftmeta.kraft.metadata_shell import (
    ShellBroker,
    ShellImage,
    ShellOutputError,
    ShellPartition,
    faults,
    read_image,
)
from raftmeta.local import quorum as local_quorum
from raftmeta.storage.datadir import log_dir
from raftmeta.storage.snapshot import parse_snapshot_name
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.integration.conftest import FAST_NODE_ARGS
from tests.integration.test_node import create, leader_of, wait_until

pytestmark = [pytest.mark.kraft, pytest.mark.timeout(900)]

# Above what the operations write (so the whole log is still there when it is copied), below
# what a few more creates write (so the leader then snapshots past them).
SNAPSHOT_INTERVAL_RECORDS = 60
NODE_ARGS = [*FAST_NODE_ARGS, "--snapshot-interval-records", str(SNAPSHOT_INTERVAL_RECORDS)]
GOLDEN_SNAPSHOT = (
    Path(__file__).parent.parent / "records" / "kafka" / "data" / "00000000000000000157-0000000001.checkpoint"
)
# The Kafka record type kafka-dump-log names for each raftmeta record type (mapping.py's table).
KAFKA_TYPES = {
    "topic": "TOPIC_RECORD",
    "partition": "PARTITION_RECORD",
    "partition_change": "PARTITION_CHANGE_RECORD",
    "remove_topic": "REMOVE_TOPIC_RECORD",
    "register_broker": "REGISTER_BROKER_RECORD",
    "unregister_broker": "UNREGISTER_BROKER_RECORD",
    "fence_broker": "BROKER_REGISTRATION_CHANGE_RECORD",
    "unfence_broker": "BROKER_REGISTRATION_CHANGE_RECORD",
    "config": "CONFIG_RECORD",
    "no_op": "NO_OP_RECORD",
    "request": "NO_OP_RECORD",
    "leader_change": "LeaderChange",
    "voters": "KRaftVoters",
    "snapshot_header": "SnapshotHeader",
    "snapshot_footer": "SnapshotFooter",
    "feature_level": "FEATURE_LEVEL_RECORD",
    "producer_ids": "PRODUCER_IDS_RECORD",
}


def run_cli(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def dump(*args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(run_cli("log", "dump", *args, "--output", "json"))
    return document


def _newest_snapshot(node: local_quorum.NodeProcess) -> int:
    ids = [parse_snapshot_name(p.name) for p in log_dir(Path(node.data_dir)).glob("*.checkpoint")]
    return max((sid.offset for sid in ids if sid is not None), default=-1)


@dataclass(frozen=True)
class Worked:
    """A raftmeta quorum after creates, a delete and a broker fence (and the partition changes it
    makes): the leader's data dir copied while idle right after them (the whole log, no snapshot
    yet), the same dir at the end (more creates later, snapshotted past the operations), what
    describe showed after the operations, and the two exports."""

    log_copy: Path
    final: Path
    described: dict[str, Any]
    log_copy_export: Path
    final_export: Path


@pytest.fixture(scope="module")
def worked(tmp_path_factory: pytest.TempPathFactory) -> Worked:
    root = tmp_path_factory.mktemp("raftmeta-export")
    quorum = local_quorum.up(root / "q", nodes=3, brokers=3, racks=3, node_args=NODE_ARGS, heartbeat_interval_ms=200)
    try:
        with SyncControllerClient(quorum.bootstrap_server, retry=RetryPolicy(deadline_s=30)) as client:
            for name, partitions in (("orders", 3), ("payments", 2), ("gone", 2)):
                result = create(client, name, partitions=partitions, rf=3)
                assert result.error_code == errors_pb2.NONE, result.error_message
            deleted = client.delete_topics(controller_pb2.DeleteTopicsRequest(topic_names=["gone"]))
            assert deleted.responses[0].error_code == errors_pb2.NONE, deleted
            _fleet_call(quorum.bootstrap_server, 10.0, "FailBrokers", (2,))
            fenced = lambda: [b.broker_id for b in client.describe_cluster().brokers if b.fenced] == [2]  # noqa: E731
            wait_until(fenced, timeout_s=60, what="broker 2 fenced")
            shrunk = lambda: all(  # noqa: E731
                2 not in p.isr for t in client.describe_topics(["orders", "payments"]).topics for p in t.partitions
            )
            wait_until(shrunk, timeout_s=60, what="broker 2 out of every ISR (partition changes)")
            described = {
                "topics": {
                    t.name: {p.partition: (list(p.replicas), list(p.isr), p.leader) for p in t.partitions}
                    for t in client.describe_topics(["orders", "payments"]).topics
                },
                "fenced": sorted(b.broker_id for b in client.describe_cluster().brokers if b.fenced),
            }
            leader = quorum.node(leader_of(client))
            # Nothing writes while the cluster idles: the copy is the committed log as it stands
            # (copied again if the high watermark moved meanwhile: a write may have been caught).
            log_copy = root / "log-copy"
            for _ in range(5):
                done = client.describe_quorum().high_watermark
                shutil.rmtree(log_copy, ignore_errors=True)
                shutil.copytree(leader.data_dir, log_copy)
                if client.describe_quorum().high_watermark == done:
                    break
            else:
                raise AssertionError("the log kept growing while it was copied (5 tries)")
            filler = 0
            while _newest_snapshot(leader) < done:
                assert filler < 40, f"no snapshot past offset {done} after {filler} more creates"
                assert create(client, f"filler-{filler}", partitions=1, rf=2).error_code == errors_pb2.NONE
                filler += 1
    finally:
        local_quorum.down(local_quorum.LocalQuorum.load(root / "q"))
    exports = []
    for source in (log_copy, Path(leader.data_dir)):
        out = root / f"{source.name}-kafka"
        run_cli("log", "export", "--format", "kafka", str(source), str(out))
        exports.append(out)
    return Worked(log_copy, Path(leader.data_dir), described, exports[0], exports[1])


def _kafka_files(export: Path) -> list[Path]:
    directory = export / "__cluster_metadata-0"
    return sorted(directory.glob("*.log")) + sorted(directory.glob("*.checkpoint"))


def _dump_log_types(export: Path) -> dict[int, str]:
    """Kafka's dump of every file of ``export``, checked batch by batch; the Kafka type it shows
    at each offset of the log's segments."""
    files = _kafka_files(export)
    dumped = parse_dump(dump_log_segments(files))
    assert sorted(Path(f.path).name for f in dumped) == sorted(p.name for p in files)
    shown_at: dict[int, str] = {}
    for kafka_file in dumped:
        assert [line for line in kafka_file.other_lines if "Error" in line or "Exception" in line] == []
        # (An empty segment is the active one a snapshot just rolled to; a snapshot is never empty.)
        assert kafka_file.batches or kafka_file.path.endswith(".log"), f"{kafka_file.path}: no batch shown"
        for batch in kafka_file.batches:
            assert batch.fields["isvalid"] == "true", (kafka_file.path, batch.fields)
            for record in batch.records:
                shown = str(record.payload["type"]) if record.label == "payload" else record.label
                assert "UNKNOWN" not in shown.upper(), (kafka_file.path, record)
                if kafka_file.path.endswith(".log"):
                    shown_at[record.offset] = shown
    return shown_at


def test_kafka_dump_log_decodes_every_batch_as_the_mapped_record(worked: Worked) -> None:
    native = dump("--data-dir", str(worked.log_copy))
    native_types = {r["offset"]: r["type"] for b in native["batches"] for r in b["records"]}
    assert {"topic", "partition", "partition_change", "remove_topic", "fence_broker", "register_broker"} <= set(
        native_types.values()
    ), "the copied log holds every operation"
    assert _dump_log_types(worked.log_copy_export) == {
        offset: KAFKA_TYPES[kind] for offset, kind in native_types.items()
    }
    final = dump("--data-dir", str(worked.final))
    final_types = {r["offset"]: r["type"] for b in final["batches"] for r in b["records"]}
    assert _dump_log_types(worked.final_export) == {offset: KAFKA_TYPES[kind] for offset, kind in final_types.items()}


def _raftmeta_image(snapshot: Path) -> ShellImage:
    """The image raftmeta's own dump of its native snapshot holds, in the shell's shape."""
    records = [r for b in dump("--snapshot", str(snapshot))["batches"] for r in b["records"]]
    names = {r["fields"]["topic_id"]: r["fields"]["name"] for r in records if r["type"] == "topic"}
    topics: dict[str, dict[int, ShellPartition]] = {name: {} for name in names.values()}
    brokers: dict[int, ShellBroker] = {}
    for record in records:
        f = record["fields"]
        if record["type"] == "partition":
            topics[names[f["topic_id"]]][f["partition_id"]] = ShellPartition(
                tuple(f["replicas"]), tuple(f["isr"]), f["leader"], f["leader_epoch"], f["partition_epoch"]
            )
        elif record["type"] == "register_broker":
            brokers[f["broker_id"]] = ShellBroker(f["broker_id"], int(f["broker_epoch"]), f.get("rack"), f["fenced"])
    return ShellImage(topics, brokers, "")


def test_kafka_metadata_shell_shows_the_topics_partitions_isrs_and_brokers_raftmeta_shows(worked: Worked) -> None:
    newest = max(log_dir(worked.final).glob("*.checkpoint"))
    shown = read_image(worked.final_export / "__cluster_metadata-0" / newest.name)
    assert faults(shown.stderr) == []
    ours = _raftmeta_image(newest)
    assert shown.topics == ours.topics
    assert shown.brokers == ours.brokers
    assert "gone" not in shown.topics
    assert {b.broker_id for b in shown.brokers.values() if b.fenced} == {2}
    assert worked.described["fenced"] == [2]
    for topic, partitions in worked.described["topics"].items():
        assert {index: (list(p.replicas), list(p.isr), p.leader) for index, p in shown.topics[topic].items()} == (
            partitions
        )


def test_raftmeta_log_dump_of_the_export_shows_the_native_records(worked: Worked) -> None:
    for native_dir, export_dir in ((worked.log_copy, worked.log_copy_export), (worked.final, worked.final_export)):
        native = dump("--data-dir", str(native_dir))
        export = dump("--data-dir", str(export_dir))
        assert export["format"] == "kafka"
        assert {r["offset"]: r.get("raftmeta") for b in export["batches"] for r in b["records"]} == {
            r["offset"]: {"type": r["type"], "fields": r["fields"]} for b in native["batches"] for r in b["records"]
        }


def test_the_shell_fault_check_catches_a_snapshot_the_shell_cannot_load() -> None:
    """The check above is not vacuous: Kafka 4.4.0's own snapshot at metadata.version 33 is one
    the 4.3.1 shell cannot load, and reading it fails naming the shell's fault."""
    with pytest.raises(
        ShellOutputError, match="Encountered shell fault: Error loading metadata log record from offset 3"
    ):
        read_image(GOLDEN_SNAPSHOT)
