"""The node's collectors over in-memory state: every catalogued metric is exposed with its labels,
gauges show the view they are given, and the latency bookkeeping counts what it should."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from raftmeta.controller import MetadataImage
from raftmeta.controller.image import PartitionRegistration
from raftmeta.metrics import catalog
from raftmeta.metrics import node as node_metrics
from raftmeta.metrics.node import ROLES, HealthCache, NodeMetrics, RaftView, image_health
from raftmeta.v1 import records_pb2

T1 = (1).to_bytes(16, "big")
T2 = (2).to_bytes(16, "big")


def broker(broker_id: int, fenced: bool) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        register_broker=records_pb2.RegisterBrokerRecord(
            broker_id=broker_id, incarnation_id=broker_id.to_bytes(16, "big"), broker_epoch=broker_id, fenced=fenced
        )
    )


def partition(
    topic_id: bytes, pid: int, replicas: list[int], isr: list[int], leader: int
) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        partition=records_pb2.PartitionRecord(
            topic_id=topic_id, partition_id=pid, replicas=replicas, isr=isr, leader=leader
        )
    )


def sample_image() -> MetadataImage:
    """4 brokers (1 fenced); topics a (3 partitions) and b (1): one healthy partition, one led by a
    non-preferred replica with a short ISR, one offline, one healthy."""
    return MetadataImage.empty().replay_all(
        [
            *(broker(b, fenced=b == 4) for b in (1, 2, 3, 4)),
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="a", topic_id=T1)),
            partition(T1, 0, [1, 2, 3], [1, 2, 3], 1),
            partition(T1, 1, [2, 3, 4], [3], 3),
            partition(T1, 2, [4, 1, 2], [4], -1),
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="b", topic_id=T2)),
            partition(T2, 0, [3, 1, 2], [3, 1, 2], 3),
        ]
    )


def view(**changes: object) -> RaftView:
    fields: dict[str, object] = {
        "role": "leader",
        "epoch": 7,
        "leader_id": 2,
        "voted_id": 2,
        "high_watermark": 120,
        "log_end_offset": 125,
        "log_end_epoch": 7,
        "unknown_voters": 1,
        "pending": 3,
        "active_controller": True,
        "applied_offset": 110,
        "image": sample_image(),
        "damaged_batches": 2,
        "repairs": 5,
    }
    fields.update(changes)
    return RaftView(**fields)  # type: ignore[arg-type]


def scrape(registry: CollectorRegistry) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted labels -> value}, parsed back from the text exposition."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def value(samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float:
    return samples[name][tuple(sorted(labels.items()))]


def test_image_health_counts_brokers_and_partitions() -> None:
    health = image_health(sample_image())
    assert (health.fenced_brokers, health.active_brokers) == (1, 3)
    assert (health.topics, health.partitions) == (2, 4)
    assert (health.offline, health.imbalanced, health.under_replicated) == (1, 1, 2)


def test_the_health_cache_equals_the_walk_and_walks_only_changed_topics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Image after image (a topic changed, one added, one removed, a broker fenced), the cached
    health equals the reference walk, and only the topics whose image changed are walked again."""
    walked: list[int] = []
    counts = node_metrics._partition_counts

    def counting(partitions: Sequence[PartitionRegistration]) -> tuple[int, int, int]:
        walked.append(len(partitions))
        return counts(partitions)

    cache = HealthCache()
    image = sample_image()
    assert cache.health(image) == image_health(image)
    monkeypatch.setattr(node_metrics, "_partition_counts", counting)
    assert cache.health(image) is cache.health(image) and walked == [], "the same image: nothing walked"
    change = records_pb2.PartitionChangeRecord(topic_id=T1, partition_id=2, leader=4, leader_epoch=1, partition_epoch=1)
    steps = [
        [records_pb2.MetadataRecord(partition_change=change)],  # a's offline partition gets a leader
        [
            records_pb2.MetadataRecord(topic=records_pb2.TopicRecord(name="c", topic_id=(3).to_bytes(16, "big"))),
            partition((3).to_bytes(16, "big"), 0, [2, 1], [1], 1),
        ],
        [records_pb2.MetadataRecord(remove_topic=records_pb2.RemoveTopicRecord(topic_id=T2))],
        [records_pb2.MetadataRecord(fence_broker=records_pb2.FenceBrokerRecord(broker_id=1, broker_epoch=1))],
    ]
    expected_walks = [[3], [1], [], []]  # partitions walked: a's three, then c's one
    for records, walks in zip(steps, expected_walks, strict=True):
        image = image.replay_all(records)
        expected = image_health(image)
        walked.clear()
        assert cache.health(image) == expected
        assert walked == walks
    assert cache.health(image).topics == 2


def test_every_catalogued_metric_is_exposed_with_its_labels() -> None:
    metrics = NodeMetrics()
    metrics.set_view(view)
    metrics.grpc.requests.labels("raftmeta.v1.ControllerService", "CreateTopics").inc()
    metrics.grpc.errors.labels("raftmeta.v1.ControllerService", "CreateTopics", "UNAVAILABLE", "NOT_CONTROLLER").inc()
    metrics.grpc.latency.labels("raftmeta.v1.ControllerService", "CreateTopics").observe(0.002)
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(metrics.registry).decode())}
    for spec in catalog.ALL:
        assert spec.family in families, spec.name
        family = families[spec.family]
        assert family.type == spec.type, spec.name
        main = [
            s
            for s in family.samples
            if s.name == spec.name or (spec.type == "histogram" and s.name == f"{spec.name}_count")
        ]
        assert main, spec.name
        for sample in main:
            assert set(sample.labels) == set(spec.labels), (spec.name, sample.labels)
    assert set(families) == {spec.family for spec in catalog.ALL}, "a metric is exposed but not catalogued"


def test_gauges_show_the_view() -> None:
    metrics = NodeMetrics()
    metrics.set_view(view)
    samples = scrape(metrics.registry)
    assert {labels[0][1]: v for labels, v in samples["raftmeta_raft_current_state"].items()} == {
        role: float(role == "leader") for role in ROLES
    }
    expected = {
        "raftmeta_raft_current_leader": 2,
        "raftmeta_raft_current_epoch": 7,
        "raftmeta_raft_current_vote": 2,
        "raftmeta_raft_high_watermark": 120,
        "raftmeta_raft_log_end_offset": 125,
        "raftmeta_raft_log_end_epoch": 7,
        "raftmeta_raft_number_unknown_voter_connections": 1,
        "raftmeta_raft_has_leader": 1,
        "raftmeta_raft_is_leader": 1,
        "raftmeta_raft_proposals_pending": 3,
        "raftmeta_controller_active_controller_count": 1,
        "raftmeta_controller_last_applied_record_offset": 110,
        "raftmeta_controller_last_committed_record_offset": 119,
        "raftmeta_controller_last_applied_record_lag_records": 9,
        "raftmeta_controller_fenced_broker_count": 1,
        "raftmeta_controller_active_broker_count": 3,
        "raftmeta_controller_global_topic_count": 2,
        "raftmeta_controller_global_partition_count": 4,
        "raftmeta_controller_offline_partitions_count": 1,
        "raftmeta_controller_preferred_replica_imbalance_count": 1,
        "raftmeta_controller_under_replicated_partitions": 2,
        "raftmeta_raft_damaged_batches": 2,
        "raftmeta_raft_repairs_total": 5,
    }
    assert {name: value(samples, name) for name in expected} == expected


def test_a_follower_without_a_leader() -> None:
    metrics = NodeMetrics()
    metrics.set_view(lambda: view(role="prospective", leader_id=-1, active_controller=False, pending=0))
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_current_state", state="prospective") == 1
    assert value(samples, "raftmeta_raft_current_state", state="leader") == 0
    assert value(samples, "raftmeta_raft_has_leader") == 0
    assert value(samples, "raftmeta_raft_is_leader") == 0
    assert value(samples, "raftmeta_controller_active_controller_count") == 0


def test_the_image_walk_is_cached_per_image() -> None:
    image = sample_image()
    calls: list[int] = []
    metrics = NodeMetrics()

    def counted() -> RaftView:
        calls.append(1)
        return view(image=image)

    metrics.set_view(counted)
    collector = next(c for c in metrics.registry._collector_to_names if type(c).__name__ == "NodeCollector")
    list(collector.collect())
    first = collector._health  # type: ignore[attr-defined]
    list(collector.collect())
    assert collector._health is first  # type: ignore[attr-defined]
    assert len(calls) == 2


def test_counters_move() -> None:
    metrics = NodeMetrics()
    stats = metrics.stats
    stats.append_records += 5
    stats.fetch_records += 2
    stats.proposals_applied += 1
    stats.proposals_failed += 1
    stats.metadata_errors += 1
    metrics.committed(high_watermark=10, batches=3, now=1.0)
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_append_records_total") == 5
    assert value(samples, "raftmeta_raft_fetch_records_total") == 2
    assert value(samples, "raftmeta_raft_proposals_committed_total") == 3
    assert value(samples, "raftmeta_raft_proposals_applied_total") == 1
    assert value(samples, "raftmeta_raft_proposals_failed_total") == 1
    assert value(samples, "raftmeta_controller_metadata_errors_total") == 1
    assert "raftmeta_raft_current_epoch" not in samples  # no view before the node starts


def test_commit_latency_is_observed_once_per_committed_leader_batch() -> None:
    metrics = NodeMetrics()
    metrics.role_changed(leader_id=1, is_leader=True, now=0.0)
    metrics.leader_appended(next_offset=5, now=1.0)
    metrics.leader_appended(next_offset=9, now=2.0)
    metrics.committed(high_watermark=5, batches=1, now=1.004)
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_commit_latency_seconds_count") == 1
    assert value(samples, "raftmeta_raft_commit_latency_seconds_bucket", le="0.005") == 1
    metrics.committed(high_watermark=9, batches=1, now=2.5)
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_commit_latency_seconds_count") == 2
    # Losing leadership drops what was appended and not committed: it never commits as ours.
    metrics.leader_appended(next_offset=12, now=3.0)
    metrics.role_changed(leader_id=2, is_leader=False, now=3.1)
    metrics.committed(high_watermark=12, batches=1, now=4.0)
    assert value(scrape(metrics.registry), "raftmeta_raft_commit_latency_seconds_count") == 2


def test_elections_and_leader_changes() -> None:
    metrics = NodeMetrics()
    metrics.role_changed(leader_id=-1, is_leader=False, now=10.0)  # start-up: no leader yet
    metrics.role_changed(leader_id=1, is_leader=False, now=10.5)
    metrics.role_changed(leader_id=1, is_leader=False, now=11.0)  # same leader: no change
    metrics.role_changed(leader_id=-1, is_leader=False, now=20.0)
    metrics.role_changed(leader_id=-1, is_leader=False, now=20.5)  # still electing
    metrics.role_changed(leader_id=3, is_leader=True, now=21.0)
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_leader_changes_seen_total") == 2
    assert value(samples, "raftmeta_raft_election_latency_seconds_count") == 2
    assert value(samples, "raftmeta_raft_election_latency_seconds_bucket", le="1.0") == 2


def test_fsync_and_snapshot() -> None:
    metrics = NodeMetrics()
    metrics.observe_fsync(0.0003)
    metrics.snapshot_taken(0.2, 4096)
    samples = scrape(metrics.registry)
    assert value(samples, "raftmeta_raft_fsync_duration_seconds_count") == 1
    assert value(samples, "raftmeta_raft_snapshot_duration_seconds_count") == 1
    assert value(samples, "raftmeta_raft_snapshot_size_bytes") == 4096


def test_nodes_in_one_process_keep_their_own_registries() -> None:
    one, two = NodeMetrics(), NodeMetrics()
    one.stats.append_records += 1
    assert value(scrape(one.registry), "raftmeta_raft_append_records_total") == 1
    assert value(scrape(two.registry), "raftmeta_raft_append_records_total") == 0
