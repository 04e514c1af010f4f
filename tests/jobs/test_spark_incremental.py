"""``verify --incremental``: a second run reads only what grew, gives the verdict a full read
gives on every doctored log, and names a verified segment that changed by node, segment and
offset; the store is not updated by a run whose logs disagree."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from raftmeta.jobs.consistency import facts_to_checks, spark_facts
from raftmeta.jobs.digests import CHECK_NAME, SUMMARY, incremental_facts
from raftmeta.jobs.layout import discover
from raftmeta.jobs.verify import run_verify
from raftmeta.records import codec
from tests.jobs.quorum_logs import append_everywhere, replace_in_node, rewrite_batch, topic_batch, write_quorum
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


@pytest.mark.parametrize("kind", ["changed-record", "missing-offset", "epoch-backwards", "crc-flip"])
def test_doctored_logs_fail_alike_through_the_store(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    """The store is built on the clean logs, then the same logs are doctored: the consistency
    checks through the store equal a full read's, and a doctored verified segment is named."""
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
    # The last batch (epoch-backwards) sits in the active segment, never stored; the others are in verified ones.
    assert check.passed == (kind == "epoch-backwards"), check
    assert figures["segments_reused"] > 0
