"""``verify --incremental``: a second run reads only what grew, gives the verdict a full read
gives on every doctored log, and names a verified segment that changed by node, segment and
offset; the store is not updated by a run whose logs disagree."""

from __future__ import annotations

import atexit
import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from raftmeta.api.ids import uuid_to_str
from raftmeta.jobs import digests
from raftmeta.jobs.consistency import facts_to_checks, spark_facts
from raftmeta.jobs.digests import CHECK_NAME, SUMMARY, incremental_facts
from raftmeta.jobs.layout import discover
from raftmeta.jobs.state_store import SUMMARY as STATE_SUMMARY
from raftmeta.jobs.verify import VerifyResult, run_verify
from raftmeta.records import codec
from raftmeta.v1 import records_pb2
from tests.jobs.quorum_logs import (
    LogBatch,
    append_everywhere,
    fence_broker,
    min_isr_config,
    partition_change,
    replace_in_node,
    rewrite_batch,
    topic_batch,
    write_quorum,
)
from tests.jobs.test_spark_snapshots import write_snapshot
from tests.jobs.test_spark_verify import doctor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_a_second_run_reads_only_new_segments_and_names_a_changed_one(spark: SparkSession, tmp_path: Path) -> None:
    root, store = tmp_path / "quorum", tmp_path / "store"
    logs = write_quorum(root, lagging=False)
    first = run_verify(spark, str(root), digest_store=store)
    assert first.passed, first.checks
    segments_per_node = len(list((root / "node-1" / "__cluster_metadata-0").glob("*.log")))
    # Everything read; every segment but each node's active one stored.
    assert first.figures["incremental"]["segments_reused"] == 0
    assert first.figures["incremental"]["segments_read"] == 3 * segments_per_node

    append_everywhere(root, logs, topic_batch(99))
    second = run_verify(spark, str(root), digest_store=store)
    assert second.passed, second.checks
    assert second.figures["incremental"]["segments_reused"] == 3 * (segments_per_node - 1)
    assert second.figures["incremental"]["segments_read"] == 3
    assert second.figures["records"] == first.figures["records"] + len(topic_batch(99))

    # A record of node 2's first (verified) segment changed, its CRC recomputed: only the hash tells.
    victim = logs[2][2]
    header = codec.check_batch(victim.data)
    records = codec.split_records(victim.data, header)
    records[1] = records[1][:-1] + bytes([records[1][-1] ^ 1])
    replace_in_node(root, 2, victim.base_offset, rewrite_batch(victim.data, records=records))
    stored = (store / SUMMARY).read_text()
    third = run_verify(spark, str(root), digest_store=store)
    failed = {c.name: c.detail for c in third.checks if not c.passed}
    assert set(failed) == {CHECK_NAME, "committed-prefixes-agree"}, failed
    assert failed[CHECK_NAME].startswith(
        f"node 2: {0:020d}.log changed since it was verified: the batch at offset {victim.base_offset} differs"
    ), failed[CHECK_NAME]
    assert f"offset {victim.base_offset} (" in failed["committed-prefixes-agree"]
    assert (store / SUMMARY).read_text() == stored, "a failed run leaves the store as it was"
    assert third.figures["incremental"]["state_replay"] == "full: a verified segment changed or the logs disagree"


@pytest.mark.parametrize("reader", ["driver", "spark"])
@pytest.mark.parametrize("kind", ["changed-record", "missing-offset", "epoch-backwards", "crc-flip"])
def test_doctored_logs_fail_alike_through_the_store(
    spark: SparkSession, tmp_path: Path, kind: str, reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store is built on the clean logs, then the same logs are doctored: the consistency
    checks through the store equal a full read's, and a doctored verified segment is named --
    whether the few bytes left to read are read by the driver or, as a large read is, by Spark."""
    if reader == "spark":
        monkeypatch.setattr(digests, "DRIVER_READ_BYTES", -1)
    root, store = tmp_path / kind, tmp_path / "store"
    doctor("clean", root)
    _, check, _ = incremental_facts(spark, str(root), discover(str(root)), store)
    assert check.passed
    shutil.rmtree(root)
    doctor(kind, root)
    full = facts_to_checks(spark_facts(spark, str(root)))
    facts, check, figures = incremental_facts(spark, str(root), discover(str(root)), store)
    assert facts_to_checks(facts) == full
    assert not all(c.passed for c in full)
    # Every doctored batch was verified: in a stored segment, or (epoch-backwards: the last batch) in the
    # committed prefix of the active segment.
    assert not check.passed, check
    assert figures["segments_reused"] > 0


# The state side: a verify with the store folds only the records after the stored point into the
# stored state; its report must be a full verify's, on clean logs and on each kind of damage.

GOLD = (10, 11)
VAULT = 77


def gold_brokers_and_vault() -> list[list[bytes]]:
    """Brokers 10 and 11 in pool "gold", and topic "vault" (pool gold) with one partition on them."""
    brokers = [
        records_pb2.MetadataRecord(
            register_broker=records_pb2.RegisterBrokerRecord(
                broker_id=b, incarnation_id=bytes([b]) * 16, broker_epoch=b, rack=f"rack-{b % 2}", pool="gold"
            )
        ).SerializeToString()
        for b in GOLD
    ]
    topic_id = VAULT.to_bytes(16, "big")
    vault = [
        records_pb2.MetadataRecord(
            topic=records_pb2.TopicRecord(name="vault", topic_id=topic_id, broker_pool="gold")
        ).SerializeToString(),
        vault_partition(0, [10, 11]),
    ]
    return [brokers, vault]


def vault_partition(partition: int, replicas: list[int]) -> bytes:
    record = records_pb2.PartitionRecord(
        topic_id=VAULT.to_bytes(16, "big"), partition_id=partition, replicas=replicas, isr=replicas, leader=replicas[0]
    )
    return records_pb2.MetadataRecord(partition=record).SerializeToString()


def create_op(op_id: int, index: int) -> dict[str, Any]:
    """An acknowledged create of topic_batch(index)'s topic."""
    return {
        "op_id": op_id, "request_id": f"req-{index}", "kind": "create_topic", "topic": f"topic-{index}",
        "topic_id": uuid_to_str(index.to_bytes(16, "big")), "invoke_ms": 1000 * op_id, "complete_ms": 1000 * op_id + 1,
        "outcome": "ok", "error": "",
    }  # fmt: skip


def report(result: VerifyResult) -> dict[str, Any]:
    """The whole report but what describes the incremental run itself (which segments it reused)."""
    document = result.to_json("/")
    document["checks"] = [c for c in document["checks"] if c["name"] != CHECK_NAME]
    document["figures"] = {k: v for k, v in document["figures"].items() if k != "incremental"}
    return document


# The verified base each case starts from, by the extra batches in it: (logs dir, store dir, logs).
_BASES: dict[tuple[tuple[bytes, ...], ...], tuple[Path, Path, dict[int, list[LogBatch]]]] = {}


def stored_base(
    root: Path, store: Path, spark: SparkSession, extra: list[list[bytes]] | None = None
) -> dict[int, list[LogBatch]]:
    """Clean logs verified once with the store: built and verified once per ``extra`` in this
    process, then copied (file times kept) into ``root`` and ``store`` -- the same first verify
    for every case that starts from it."""
    key = tuple(tuple(batch) for batch in extra or [])
    if key not in _BASES:
        template = Path(tempfile.mkdtemp(prefix="stored-base-"))
        atexit.register(shutil.rmtree, template, True)
        logs = write_quorum(template / "quorum", lagging=False)
        for batch in [*gold_brokers_and_vault(), *(extra or [])]:
            append_everywhere(template / "quorum", logs, batch)
        first = run_verify(spark, str(template / "quorum"), digest_store=template / "store")
        assert first.passed, [c for c in first.checks if not c.passed]
        assert first.figures["incremental"]["state_stored_at"] == first.figures["committed_offset_by_node"]["1"]
        _BASES[key] = (template / "quorum", template / "store", logs)
    base_root, base_store, logs = _BASES[key]
    shutil.copytree(base_root, root)
    shutil.copytree(base_store, store)
    return copy.deepcopy(logs)


def new_part(root: Path, logs: dict[int, list[LogBatch]], kind: str) -> set[str]:
    """Append the new records (damaged as ``kind`` says); return the checks that must fail."""
    append_everywhere(root, logs, topic_batch(40))
    # Old partitions (their previous state only in the store) change: a leader moves, an ISR shrinks.
    append_everywhere(root, logs, [partition_change(1, 0, leader=2, isr=[2, 3, 1], leader_epoch=1, partition_epoch=1)])
    append_everywhere(root, logs, [vault_partition(1, [11, 10])])
    if kind == "clean":
        append_everywhere(root, logs, topic_batch(41))
        return set()
    if kind == "duplicate-replica":
        append_everywhere(root, logs, [partition_change(2, 1, replicas=[3, 3, 5], leader_epoch=0, partition_epoch=1)])
        return {"partition-states-valid"}
    if kind == "leader-outside-isr":
        # topic-40-0's replicas and ISR are [4, 5, 0].
        append_everywhere(root, logs, [partition_change(40, 0, leader=1, leader_epoch=1, partition_epoch=1)])
        return {"partition-states-valid"}
    if kind == "partition-epoch-skips":
        # Partition 3-2's previous state is only in the store: its epoch 0 must become 1, not 5.
        append_everywhere(root, logs, [partition_change(3, 2, isr=[5, 0, 1], leader_epoch=0, partition_epoch=5)])
        return {"partition-states-valid"}
    if kind == "pool-violation":
        append_everywhere(root, logs, [vault_partition(2, [10, 3])])
        return {"partition-states-valid"}
    if kind == "lost-acknowledged-create":
        return {"acknowledged-creates-committed-once"}
    last = logs[1][-1]
    if kind == "changed-record":
        header = codec.check_batch(last.data)
        records = codec.split_records(last.data, header)
        records[0] = records[0][:-1] + bytes([records[0][-1] ^ 1])
        replace_in_node(root, 2, last.base_offset, rewrite_batch(last.data, records=records))
        return {"committed-prefixes-agree"}
    if kind == "missing-offset":
        append_everywhere(root, logs, topic_batch(41))
        replace_in_node(root, 1, last.base_offset, None)
        return {"offsets-contiguous", "committed-prefixes-agree"}
    if kind == "epoch-backwards":
        replace_in_node(root, 1, last.base_offset, rewrite_batch(last.data, epoch=1))
        return {"epochs-non-decreasing", "committed-prefixes-agree"}
    raise AssertionError(kind)


def history_file(root: Path, kind: str) -> Path:
    ops = [create_op(1, 3), create_op(2, 40)]
    if kind == "lost-acknowledged-create":
        ops.append({**create_op(3, 41), "topic": "topic-41"})  # acknowledged, never written
    path = root.parent / f"{root.name}-history.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in ops))
    return path


@pytest.mark.parametrize(
    "kind",
    [
        "clean", "duplicate-replica", "leader-outside-isr", "partition-epoch-skips", "pool-violation",
        "lost-acknowledged-create", "changed-record", "missing-offset", "epoch-backwards",
    ],
)  # fmt: skip
def test_incremental_report_equals_a_full_verifys(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    root, store = tmp_path / "quorum", tmp_path / "store"
    logs = stored_base(root, store, spark)
    failing = new_part(root, logs, kind)
    history = str(history_file(root, kind))
    incremental = run_verify(spark, str(root), digest_store=store, history=history)
    full = run_verify(spark, str(root), history=history)
    assert report(incremental) == report(full)
    failed = {c.name for c in full.checks if not c.passed}
    assert failed == failing, failed
    how = incremental.figures["incremental"]["state_replay"]
    if "committed-prefixes-agree" not in failing:
        assert how.startswith("from the stored state at offset"), how
    else:  # damage across nodes: the stored state is not used until the logs agree again
        assert how == "full: a verified segment changed or the logs disagree", how
    if failing == {"partition-states-valid"}:
        detail = next(c.detail for c in incremental.checks if c.name == "partition-states-valid")
        expected = {
            "duplicate-replica": "topic-2-1 at offset",
            "leader-outside-isr": "topic-40-0 at offset",
            "partition-epoch-skips": "topic-3-2 at offset",
            "pool-violation": "vault-2 at offset",
        }[kind]
        assert expected in detail, detail
        rule = {
            "duplicate-replica": "duplicate replica",
            "leader-outside-isr": "leader outside the ISR",
            "partition-epoch-skips": "partition epoch did not rise by one",
            "pool-violation": "replica outside the topic's broker pool",
        }[kind]
        assert rule in detail, detail
    if not failing:
        # The passing run moved the stored point; a third run with nothing new reads nothing more.
        assert (
            incremental.figures["incremental"]["state_stored_at"]
            == incremental.figures["committed_offset_by_node"]["1"]
        )
        again = run_verify(spark, str(root), digest_store=store, history=history)
        assert report(again) == report(full)
        assert again.figures["incremental"]["state_replay"].endswith("(0 records after it)")
        assert again.state.partition("topic-1", 0) == full.state.partition("topic-1", 0) == ([1, 2, 3], [2, 3, 1], 2)
        assert sorted(again.state.topic_names()) == sorted(full.state.topic_names())


@pytest.mark.parametrize(
    "kind",
    ["pool-left", "fence-unregistered", "min-isr-spelling", "new-snapshot", "damaged-store", "other-version"],
)
def test_what_the_delta_cannot_prove_is_replayed_in_full(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    root, store = tmp_path / "quorum", tmp_path / "store"
    # Broker 4 is unregistered before the point: the store keeps no registration of it.
    logs = stored_base(root, store, spark, [[unregister_broker(4)]] if kind == "fence-unregistered" else None)
    append_everywhere(root, logs, topic_batch(40))
    summary = store / "state" / STATE_SUMMARY
    if kind == "pool-left":
        # Broker 11 leaves pool gold, which the stored topic "vault" uses: every earlier state of vault
        # on broker 11 now breaks the pool rule, and only the log holds those states.
        append_everywhere(root, logs, [register_broker(11, "rack-1", pool="silver")])
        expected = "full: broker 11 re-registered in pool 'silver', leaving pool 'gold'"
    elif kind == "fence-unregistered":
        append_everywhere(root, logs, [fence_broker(4)])
        expected = "full: a fence_broker record at offset"
    elif kind == "min-isr-spelling":
        append_everywhere(root, logs, [min_isr_config("topic-1", " 2")])
        expected = "full: a min.insync.replicas config at offset"
    elif kind == "new-snapshot":
        # Node 1 snapshots: the replay base moves, so the stored state's derivation no longer holds.
        write_snapshot(root, 1, logs[1], logs[1][-1].base_offset)
        expected = "full: a node's newest snapshot is new or changed"
    elif kind == "damaged-store":
        summary.write_text(summary.read_text()[:-20])
        expected = "full: "
    else:
        summary.write_text(summary.read_text().replace('"version": 1', '"version": 99'))
        expected = "full: stored state version 99, expected 1"
    incremental = run_verify(spark, str(root), digest_store=store)
    full = run_verify(spark, str(root))
    assert report(incremental) == report(full)
    assert incremental.figures["incremental"]["state_replay"].startswith(expected), incremental.figures


# Broker and min.insync.replicas records are folded in: they change the health, rack spread and
# rules of partitions no new record touches, which the delta recomputes from the stored layers.


def register_broker(broker: int, rack: str, *, pool: str | None = None, fenced: bool = False) -> bytes:
    """A (re-)registration of ``broker`` with a new incarnation and epoch."""
    record = records_pb2.RegisterBrokerRecord(
        broker_id=broker, incarnation_id=bytes([broker + 100]) * 16, broker_epoch=100 + broker, rack=rack,
        fenced=fenced,
    )  # fmt: skip
    if pool is not None:
        record.pool = pool
    return records_pb2.MetadataRecord(register_broker=record).SerializeToString()


def unfence_broker(broker: int) -> bytes:
    record = records_pb2.UnfenceBrokerRecord(broker_id=broker, broker_epoch=broker + 1)
    return records_pb2.MetadataRecord(unfence_broker=record).SerializeToString()


def unregister_broker(broker: int) -> bytes:
    record = records_pb2.UnregisterBrokerRecord(broker_id=broker, broker_epoch=broker + 1)
    return records_pb2.MetadataRecord(unregister_broker=record).SerializeToString()


def topic_on(index: int, replicas: list[int]) -> list[bytes]:
    """Topic ``topic-<index>`` with one partition on ``replicas``."""
    topic_id = index.to_bytes(16, "big")
    records = [
        records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name=f"topic-{index}", topic_id=topic_id)),
        records_pb2.MetadataRecord(
            partition=records_pb2.PartitionRecord(
                topic_id=topic_id, partition_id=0, replicas=replicas, isr=replicas, leader=replicas[0]
            )
        ),
    ]
    return [r.SerializeToString() for r in records]


# Before the point: broker 5 fenced and topic-3-0 ([3, 4, 5]) dropped it from its ISR --
# under-replicated, but not stuck while 5 is fenced.
SHRUNK = [[fence_broker(5)], [partition_change(3, 0, isr=[3, 4], leader_epoch=0, partition_epoch=1)]]


def broker_part(root: Path, logs: dict[int, list[LogBatch]], kind: str) -> tuple[set[str], str | None]:
    """Append the broker records of ``kind`` after new_part's clean records; return the checks
    that must fail and what their detail names."""
    new_part(root, logs, "clean")
    if kind == "restart":
        # Broker 0 restarts (fenced, registers again fenced, unfenced); broker 4 goes down and stays
        # fenced (the partitions it leads become unavailable); broker 5 comes back and rejoins
        # topic-3-0's ISR.
        append_everywhere(root, logs, [fence_broker(0)])
        append_everywhere(root, logs, [register_broker(0, "rack-0", fenced=True)])
        append_everywhere(root, logs, [unfence_broker(0), fence_broker(4)])
        append_everywhere(root, logs, [unfence_broker(5)])
        append_everywhere(root, logs, [partition_change(3, 0, isr=[3, 4, 5], leader_epoch=0, partition_epoch=2)])
        return set(), None
    if kind == "unregister-and-configs":
        # Broker 1 leaves, broker 6 joins in a new rack (the number of racks changes), broker 3
        # registers again in another rack (rack spread changes), and min.insync.replicas is set, reset by a
        # deletion, and set on a name whose TopicRecord comes after it (which does not count).
        append_everywhere(root, logs, [unregister_broker(1)])
        append_everywhere(root, logs, [register_broker(6, "rack-9"), register_broker(3, "rack-2")])
        append_everywhere(root, logs, [min_isr_config("topic-2", "3"), min_isr_config("vault", "2")])
        append_everywhere(root, logs, [min_isr_config("topic-4", "3"), min_isr_config("topic-43", "2")])
        append_everywhere(root, logs, [min_isr_config("topic-4", None)])
        append_everywhere(root, logs, topic_on(43, [6, 0, 2]))
        return set(), None
    if kind == "rejoin-missed":
        # Broker 5 is unfenced but topic-3-0 (no new record of it) never takes it back in its ISR.
        append_everywhere(root, logs, [unfence_broker(5)])
        return {"isr-full-when-replicas-live"}, "topic-3-0"
    if kind == "registered-late":
        # A partition placed on broker 6 before broker 6 registers.
        append_everywhere(root, logs, topic_on(42, [6, 0, 1]))
        append_everywhere(root, logs, [register_broker(6, "rack-0")])
        return {"partition-states-valid"}, "topic-42-0 at offset"
    if kind == "pool-by-reregistration":
        # Broker 12 joins pool gold and holds a vault replica, then registers again in pool silver.
        append_everywhere(root, logs, [register_broker(12, "rack-0", pool="gold")])
        append_everywhere(root, logs, [vault_partition(2, [12, 10])])
        append_everywhere(root, logs, [register_broker(12, "rack-0", pool="silver")])
        return {"partition-states-valid"}, "vault-2 at offset"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind", ["restart", "unregister-and-configs", "rejoin-missed", "registered-late", "pool-by-reregistration"]
)
def test_broker_and_min_isr_records_are_folded_in(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    root, store = tmp_path / "quorum", tmp_path / "store"
    logs = stored_base(root, store, spark, SHRUNK)
    failing, named = broker_part(root, logs, kind)
    history = str(history_file(root, kind))
    incremental = run_verify(spark, str(root), digest_store=store, history=history)
    full = run_verify(spark, str(root), history=history)
    assert report(incremental) == report(full)
    failed = {c.name: c.detail for c in full.checks if not c.passed}
    assert set(failed) == failing, failed
    how = incremental.figures["incremental"]["state_replay"]
    assert how.startswith("from the stored state at offset"), how
    if named is not None:
        (check,) = failing
        assert named in failed[check], failed[check]
        if kind == "pool-by-reregistration":
            assert "replica outside the topic's broker pool" in failed[check]
        if kind == "registered-late":
            assert "replica not a registered broker" in failed[check]
        return
    # The figures moved on partitions no new record touches (else the equality above proves little):
    # partitions led by the fenced broker 4 are unavailable; broker 3 moving to rack-2 breaks the
    # rack spread of its partitions; topic-2 (3) and vault (2) are at their min.insync.replicas.
    if kind == "restart":
        assert full.figures["unavailable_partitions"] > 0, full.figures
    else:
        assert full.figures["rack_spread_violations"] > 0, full.figures
        assert full.figures["at_min_isr_partitions"] >= 5, full.figures
    # The folded broker facts and min.insync.replicas were stored: a later run starts from them.
    append_everywhere(root, logs, [fence_broker(2), min_isr_config("topic-5", "2")])
    again = run_verify(spark, str(root), digest_store=store, history=history)
    full_again = run_verify(spark, str(root), history=history)
    assert report(again) == report(full_again)
    assert again.figures["incremental"]["state_replay"].startswith("from the stored state at offset")
    assert again.passed, [c for c in again.checks if not c.passed]
