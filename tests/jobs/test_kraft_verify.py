"""``raftmeta verify`` of a KRaft quorum's metadata logs in Kafka's format: the real log of
tests/records/kafka/data on three controllers passes; a flipped byte, a dropped batch or a
partition state that breaks invariant 7 fails, naming the controller (or partition) and offset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.jobs.kraft_verify import NodeLog, controller_ids, find_kraft_logs, verify_kraft
from raftmeta.local.quorum import KAFKA_BROKERS_DIR, QUORUM_FILE
from raftmeta.records.kafka.batch import RecordBatch, batch_size, encode_batch, iter_batches
from raftmeta.records.kafka.frames import ControlRecord, MetadataRecord, batch_records, metadata_record, new_batch
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schema import Uuid
from raftmeta.records.kafka.schemas import LEADER_CHANGE
from raftmeta.records.kafka.walk import FoundKafkaBatch
from raftmeta.storage.kafka_inspect import KafkaBatchEntry

DATA = Path(__file__).parent.parent / "records" / "kafka" / "data"
SEGMENT = "00000000000000000000.log"
SNAPSHOT = "00000000000000000157-0000000001.checkpoint"
CONTROLLERS = (3001, 3002, 3003)
TOPIC_T1 = Uuid.parse("YM5a_I75RvmiOO7ZHB5iEQ")  # t1 in the data: 3 partitions on brokers 0-2


@pytest.fixture
def quorum(tmp_path: Path) -> Path:
    """Three controllers' data dirs, each with the (identical, as Kafka's are) real log."""
    for node_id in CONTROLLERS:
        log_dir = tmp_path / f"controller-{node_id}" / "data" / "__cluster_metadata-0"
        log_dir.mkdir(parents=True)
        shutil.copy(DATA / SEGMENT, log_dir / SEGMENT)
        for snapshot in DATA.glob("*.checkpoint"):
            shutil.copy(snapshot, log_dir / snapshot.name)
        (log_dir.parent / "meta.properties").write_text(f"node.id={node_id}\nversion=1\ncluster.id=c\n")
    return tmp_path


def segment_of(quorum: Path, node_id: int) -> Path:
    return quorum / f"controller-{node_id}" / "data" / "__cluster_metadata-0" / SEGMENT


def failed(quorum: Path) -> dict[str, str]:
    result = verify_kraft(quorum)
    return {c.name: c.detail for c in result.checks if not c.passed}


def test_the_real_quorums_logs_pass(quorum: Path) -> None:
    result = verify_kraft(quorum)
    assert result.passed, result.checks
    assert result.figures["controllers"] == list(CONTROLLERS)
    assert (result.figures["nodes"], result.figures["records"], result.figures["partitions"]) == (3, 157, 3)
    # Balance and health of t1 at the end of the log: RF 3 over brokers 0-2 in three racks, all
    # three brokers fenced by their shutdown, so no leader and an empty ISR.
    figures = result.figures
    assert figures["replicas_per_broker"] == {"0": 3, "1": 3, "2": 3}
    assert figures["preferred_leaders_per_broker"] == {"0": 1, "1": 1, "2": 1}
    assert (figures["replica_skew"], figures["leader_skew"], figures["rack_spread_violations"]) == (1.0, 1.0, 0)
    assert (figures["leaderless_partitions"], figures["fenced_brokers"]) == (3, 3)
    assert figures["isr_size_counts"] == {"0/3": 3}
    assert (figures["offline_partitions"], figures["under_min_isr_partitions"]) == (3, 3)
    assert result.health["verdict"] == "FAILED"
    assert [(p["topic"], p["partition"], p["why"]) for p in result.health["unhealthy_partitions"]["listed"]] == [
        ("t1", n, ["offline", "under_min_isr", "under_replicated"]) for n in range(3)
    ]
    details = {c.name: c.detail for c in result.checks}
    assert details["logs-agree"] == "110 batches held by two or more nodes, all identical"
    # The log ends with t1's ISR emptied by the brokers' shutdown and its ELR holding broker 2
    # (KIP-966): a state Kafka means, which passes.
    assert "partition states along controller 3001's log, offsets 0..156" in details["partition-states-valid"]


def test_a_flipped_byte_on_one_controller_fails_naming_it_and_the_offset(quorum: Path) -> None:
    segment = segment_of(quorum, 3002)
    data = bytearray(segment.read_bytes())
    data[292 + 40] ^= 0x01  # in the batch at byte 292 (offsets 3-11)
    segment.write_bytes(bytes(data))
    problems = failed(quorum)
    assert set(problems) == {"batch-integrity", "logs-agree"}
    assert problems["batch-integrity"].startswith(f"controller 3002: {SEGMENT} at byte 292 (offset 3): CRC32C mismatch")
    assert (
        problems["logs-agree"] == "offset 3: controller 3002 hold another batch than controller 3001, controller 3003"
    )


def test_a_batch_dropped_on_one_controller_fails_naming_it_and_the_offset(quorum: Path) -> None:
    segment = segment_of(quorum, 3003)
    data = segment.read_bytes()
    second = batch_size(data, 0)
    segment.write_bytes(data[:second] + data[second + batch_size(data, second) :])  # offsets 3-11 gone
    problems = failed(quorum)
    assert set(problems) == {"offsets-contiguous", "logs-agree"}
    assert (
        problems["offsets-contiguous"]
        == f"controller 3003: {SEGMENT} at byte 292: batch starts at offset 12, expected 3"
    )
    assert (
        problems["logs-agree"] == "offset 3: controller 3003 hold no batch there, controller 3001, controller 3002 do"
    )


def _append_to_every_controller(quorum: Path, *changes: dict[str, object]) -> None:
    records = [metadata_record("PartitionChangeRecord", 2, TopicId=TOPIC_T1, **change) for change in changes]
    batch = encode_batch(new_batch(157, 1, records, 1_800_000_000_000))
    for node_id in CONTROLLERS:
        segment = segment_of(quorum, node_id)
        segment.write_bytes(segment.read_bytes() + batch)


def test_a_partition_state_breaking_invariant_7_fails_naming_the_partition_and_offset(quorum: Path) -> None:
    # Broker 1 made leader of t1-0 while the ISR is empty; t1-1's ELR emptied too.
    _append_to_every_controller(
        quorum, {"PartitionId": 0, "Leader": 1}, {"PartitionId": 1, "EligibleLeaderReplicas": ()}
    )
    problems = failed(quorum)
    assert set(problems) == {"partition-states-valid"}
    assert problems["partition-states-valid"] == (
        "t1-0 at offset 157: leader outside the ISR; t1-1 at offset 158: ISR empty: the partition lost its last "
        "in-sync replica"
    )


def test_verify_reads_a_kraft_quorum_dir_and_exits_1_on_failure(quorum: Path) -> None:
    runner = CliRunner()
    passed = runner.invoke(cli, ["verify", "--reader", "python", "--data-dir", str(quorum), "--output", "json"])
    assert passed.exit_code == 0, passed.output
    document = json.loads(passed.stdout)
    assert (document["format"], document["passed"]) == ("kafka", True)
    # Consistent, and unhealthy: the brokers' shutdown left t1 without a leader.
    assert document["health"]["verdict"] == "FAILED"
    segment = segment_of(quorum, 3001)
    data = segment.read_bytes()
    last = list(iter_batches(data))[-1][0]
    segment.write_bytes(data[: last + 30])  # the last batch torn: a write in progress, not damage
    torn = runner.invoke(cli, ["verify", "--reader", "python", "--data-dir", str(quorum), "--output", "json"])
    assert torn.exit_code == 0, torn.output
    integrity = json.loads(torn.stdout)["checks"][0]
    assert integrity["detail"].endswith(f"controller 3001: {SEGMENT} ends inside the batch at byte {last} (torn tail)")
    doctored = bytearray(data)
    doctored[last + 40] ^= 0x01
    segment.write_bytes(bytes(doctored))
    failed_run = runner.invoke(cli, ["verify", "--reader", "python", "--data-dir", str(quorum)])
    assert failed_run.exit_code == 1
    assert "controller 3001" in failed_run.output
    assert "health FAILED; 3 partitions offline (no leader)" in failed_run.output
    assert "t1-2  leader -1  replicas [0, 1, 2]  isr []" in failed_run.output  # the rest may wrap
    refused = runner.invoke(
        cli, ["verify", "--reader", "python", "--data-dir", str(quorum), "--report-dir", str(quorum / "out")]
    )
    assert refused.exit_code == 2
    assert "holds KRaft metadata logs in Kafka's format, which --report-dir does not read" in refused.output


def test_a_snapshot_that_differs_from_the_log_fails_naming_the_node_file_and_partition(quorum: Path) -> None:
    assert (
        "3 nodes' newest snapshots equal controller 3001's log"
        in {c.name: c.detail for c in verify_kraft(quorum).checks}["snapshots-match-log"]
    )
    # Controller 3002's snapshot rewritten with t1-1's leader epoch one higher than the log gives.
    snapshot = quorum / "controller-3002" / "data" / "__cluster_metadata-0" / SNAPSHOT
    rewritten = []
    for _, batch in iter_batches(snapshot.read_bytes()):
        records = [record for _, record in batch_records(batch)]
        for index, record in enumerate(records):
            data = record.data
            if (
                isinstance(record, MetadataRecord)
                and isinstance(data, Struct)
                and record.name == "PartitionRecord"
                and data["PartitionId"] == 1
            ):
                epoch = data["LeaderEpoch"]
                assert isinstance(epoch, int)
                changed = Struct({**data.values, "LeaderEpoch": epoch + 1}, data.unknown_tagged)
                records[index] = MetadataRecord(record.api_key, record.version, changed)
        rewritten.append(
            encode_batch(new_batch(batch.base_offset, batch.partition_leader_epoch, records, batch.max_timestamp,
                                   control=batch.is_control))
        )  # fmt: skip
    snapshot.chmod(0o644)
    snapshot.write_bytes(b"".join(rewritten))
    problems = failed(quorum)
    assert set(problems) == {"snapshots-match-log"}
    assert problems["snapshots-match-log"] == f"controller 3002: {SNAPSHOT}: t1-1: leader_epoch 2 (log 1)"


def test_a_batch_that_differs_only_in_its_leader_epoch_is_another_batch(quorum: Path) -> None:
    # A deposed leader's batch at the same offset may hold the same records under an older epoch;
    # the CRC does not cover the epoch, the comparison does.
    segment = segment_of(quorum, 3003)
    data = bytearray(segment.read_bytes())
    last = list(iter_batches(bytes(data)))[-1][0]
    data[last + 12 : last + 16] = (0).to_bytes(4, "big")  # partitionLeaderEpoch 1 -> 0
    segment.write_bytes(bytes(data))
    problems = failed(quorum)
    assert (
        problems["logs-agree"] == "offset 156: controller 3003 hold another batch than controller 3001, controller 3002"
    )
    assert set(problems) == {"logs-agree", "epochs-non-decreasing"}


def test_a_static_quorums_controllers_are_the_leader_changes_voters() -> None:
    leader_change = ControlRecord(
        LEADER_CHANGE,
        Struct({"Version": 0, "LeaderId": 1, "Voters": (Struct({"VoterId": 1}), Struct({"VoterId": 2})),
                "GrantingVoters": (Struct({"VoterId": 1}),)}),
    )  # fmt: skip
    entry = KafkaBatchEntry(Path(SEGMENT), _found(new_batch(0, 1, [leader_change], 5, control=True)))
    assert controller_ids([NodeLog(1, Path("."), batches=[entry])]) == {1, 2}


def _found(batch: RecordBatch) -> FoundKafkaBatch:
    return FoundKafkaBatch(0, 0, 0, True, batch, tuple(batch_records(batch)))


def test_a_version_0_partition_record_without_an_elr_is_replayed(quorum: Path) -> None:
    # PartitionRecord and PartitionChangeRecord have no EligibleLeaderReplicas before version 1.
    records = [
        metadata_record("PartitionRecord", 0, TopicId=TOPIC_T1, PartitionId=7, Replicas=(0, 1), Isr=(0, 1), Leader=0),
        metadata_record("PartitionChangeRecord", 0, TopicId=TOPIC_T1, PartitionId=7, Isr=(0,)),
    ]
    batch = encode_batch(new_batch(157, 1, records, 1_800_000_000_000))
    for node_id in CONTROLLERS:
        segment = segment_of(quorum, node_id)
        segment.write_bytes(segment.read_bytes() + batch)
    result = verify_kraft(quorum)
    assert result.passed, result.checks
    assert (result.figures["records"], result.figures["partitions"]) == (159, 4)


def test_verify_auto_reads_a_small_kraft_quorum_in_process(quorum: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--reader auto`` (the default) keeps a few MB of log off Spark's fixed cost; past
    JVM_READER_FROM_BYTES it takes the JVM path when its jar is built."""
    import raftmeta.cli.verify as verify_cli
    import raftmeta.jobs.kafka_log_jar as jar

    assert 0 < verify_cli.kafka_log_bytes(quorum) < verify_cli.JVM_READER_FROM_BYTES
    small = CliRunner().invoke(cli, ["verify", "--data-dir", str(quorum), "--output", "json"])
    assert small.exit_code == 0, small.output
    assert json.loads(small.stdout)["reader"] == "python"
    # Past the threshold and with no jar, auto still answers in process (nothing to fail over).
    monkeypatch.setattr(verify_cli, "JVM_READER_FROM_BYTES", 1)
    monkeypatch.setattr(jar, "reader_built", lambda: False)
    unbuilt = CliRunner().invoke(cli, ["verify", "--data-dir", str(quorum), "--output", "json"])
    assert json.loads(unbuilt.stdout)["reader"] == "python"


def test_a_raftmeta_quorums_real_brokers_logs_are_not_the_quorums(quorum: Path) -> None:
    """``quorum up --kafka-brokers`` keeps the brokers (observers, Kafka's format) in
    DIR/kafka-brokers: verify of a raftmeta quorum's dir reads its nodes, never those copies; a
    KRaft cluster's dir (no quorum.json) is read whole."""
    brokers = quorum / KAFKA_BROKERS_DIR
    shutil.copytree(quorum / "controller-3001", brokers / "broker-100")
    assert len(find_kraft_logs(quorum)) == 4, "a KRaft dir: every log under it"
    (quorum / QUORUM_FILE).write_text("{}")
    assert sorted(p.parent.parent.name for p in find_kraft_logs(quorum)) == [f"controller-{n}" for n in CONTROLLERS]
    shutil.rmtree(quorum / "controller-3001")
    shutil.rmtree(quorum / "controller-3002")
    shutil.rmtree(quorum / "controller-3003")
    assert find_kraft_logs(quorum) == [], "a raftmeta quorum with brokers: not a KRaft dir"
