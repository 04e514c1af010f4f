"""``bench kafka-verify``'s quorum: every controller holds the same Kafka-format log of the asked
size in segments named by their base offsets, and it passes verify (the benchmark refuses a run
that fails)."""

from __future__ import annotations

from pathlib import Path

from raftmeta.bench.kafka_verify import kafka_quorum
from raftmeta.jobs.kraft_verify import verify_kraft


def test_the_generated_quorum_passes_verify_with_every_record(tmp_path: Path) -> None:
    records = kafka_quorum(tmp_path, records=1_000, nodes=3, brokers=6, segment_records=300)
    assert records == 1_000
    segments = sorted(p.name for p in (tmp_path / "controller-0" / "data" / "__cluster_metadata-0").glob("*.log"))
    assert segments[0] == f"{0:020d}.log" and len(segments) == 4
    result = verify_kraft(tmp_path)
    assert result.passed, result.checks
    assert (result.figures["nodes"], result.figures["records"], result.figures["brokers"]) == (3, 1_000, 6)
    assert result.figures["partitions"] == 1_000 - 6 - result.figures["topics"]
