"""Every metric a node exports: name, type, unit, labels and meaning -- the one list that
docs/metrics.md, the dashboard test and the collectors are checked against.

Names follow what operators already know: KafkaRaftMetrics (``kafka.server:type=raft-metrics``)
under ``raftmeta_raft_``, etcd's server metrics (``etcd_server_has_leader`` ...) beside them, and
Kafka's controller metrics (``kafka.controller:type=KafkaController``) under
``raftmeta_controller_``, in Prometheus' spelling: snake case, the unit last (``_seconds``,
``_bytes``), counters ending in ``_total``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter", "histogram"]

PREFIX = "raftmeta_"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str  # as exposed (counters with their ``_total``)
    type: MetricType
    unit: str  # "" for plain numbers (ids, offsets, counts)
    help: str
    labels: tuple[str, ...] = ()
    # Kafka's or etcd's name for the same thing, for the docs.
    known_as: str = ""

    @property
    def family(self) -> str:
        """The family name prometheus_client uses (a counter's without ``_total``)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name


RAFT: tuple[MetricSpec, ...] = (
    MetricSpec(
        "raftmeta_raft_current_state",
        "gauge",
        "",
        "1 for this node's Raft role, 0 for the others.",
        ("state",),
        "current-state",
    ),
    MetricSpec(
        "raftmeta_raft_current_leader", "gauge", "", "Id of the known leader, -1 if none.", (), "current-leader"
    ),
    MetricSpec("raftmeta_raft_current_epoch", "gauge", "", "The current quorum epoch.", (), "current-epoch"),
    MetricSpec(
        "raftmeta_raft_current_vote",
        "gauge",
        "",
        "Id of the voter this node voted for in this epoch, -1 if none.",
        (),
        "current-vote",
    ),
    MetricSpec(
        "raftmeta_raft_high_watermark",
        "gauge",
        "",
        "The high watermark: every offset below it is committed.",
        (),
        "high-watermark",
    ),
    MetricSpec(
        "raftmeta_raft_log_end_offset",
        "gauge",
        "",
        "The offset after the last batch in this node's log.",
        (),
        "log-end-offset",
    ),
    MetricSpec(
        "raftmeta_raft_log_end_epoch", "gauge", "", "The epoch of the last batch in the log.", (), "log-end-epoch"
    ),
    MetricSpec(
        "raftmeta_raft_number_unknown_voter_connections",
        "gauge",
        "",
        "Leader only: voters that have not fetched (or acknowledged) in this epoch; 0 elsewhere.",
        (),
        "number-unknown-voter-connections",
    ),
    MetricSpec(
        "raftmeta_raft_commit_latency_seconds",
        "histogram",
        "seconds",
        "Leader only: time from appending a batch to the high watermark passing it.",
        (),
        "commit-latency-avg/max",
    ),
    MetricSpec(
        "raftmeta_raft_election_latency_seconds",
        "histogram",
        "seconds",
        "Time from losing the leader (or starting) to knowing a new one.",
        (),
        "election-latency-avg/max",
    ),
    MetricSpec(
        "raftmeta_raft_append_records_total",
        "counter",
        "records",
        "Records the leader appended to its log.",
        (),
        "append-records-rate",
    ),
    MetricSpec(
        "raftmeta_raft_fetch_records_total",
        "counter",
        "records",
        "Records a follower (or observer) fetched from the leader and appended.",
        (),
        "fetch-records-rate",
    ),
    MetricSpec(
        "raftmeta_raft_poll_idle_seconds_total",
        "counter",
        "seconds",
        "Time the node task waited with nothing to do; its rate() is Kafka's poll idle ratio.",
        (),
        "poll-idle-ratio-avg",
    ),
    MetricSpec(
        "raftmeta_raft_has_leader", "gauge", "", "1 if this node knows a leader, else 0.", (), "etcd_server_has_leader"
    ),
    MetricSpec("raftmeta_raft_is_leader", "gauge", "", "1 if this node is the leader.", (), "etcd_server_is_leader"),
    MetricSpec(
        "raftmeta_raft_leader_changes_seen_total",
        "counter",
        "",
        "Times this node learnt of a new leader (itself included).",
        (),
        "etcd_server_leader_changes_seen_total",
    ),
    MetricSpec(
        "raftmeta_raft_proposals_committed_total",
        "counter",
        "batches",
        "Batches this node saw committed (the high watermark passed them).",
        (),
        "etcd_server_proposals_committed_total",
    ),
    MetricSpec(
        "raftmeta_raft_proposals_applied_total",
        "counter",
        "batches",
        "Committed batches handed to the controller to apply to its image.",
        (),
        "etcd_server_proposals_applied_total",
    ),
    MetricSpec(
        "raftmeta_raft_proposals_pending",
        "gauge",
        "requests",
        "Leader only: admin requests waiting for a commit, a read-index round or the controller to activate.",
        (),
        "etcd_server_proposals_pending",
    ),
    MetricSpec(
        "raftmeta_raft_proposals_failed_total",
        "counter",
        "requests",
        "Admin requests failed with NOT_CONTROLLER (leadership lost before their batch committed).",
        (),
        "etcd_server_proposals_failed_total",
    ),
    MetricSpec(
        "raftmeta_raft_fsync_duration_seconds",
        "histogram",
        "seconds",
        "Duration of one fsync of the log.",
        (),
        "etcd_disk_wal_fsync_duration_seconds",
    ),
    MetricSpec(
        "raftmeta_raft_snapshot_duration_seconds",
        "histogram",
        "seconds",
        "Time to encode, write and fsync one snapshot of the metadata image.",
        (),
        "etcd_debugging_snap_save_total_duration_seconds",
    ),
    MetricSpec(
        "raftmeta_raft_snapshot_size_bytes",
        "gauge",
        "bytes",
        "Size of the newest snapshot this node holds (taken, installed from the leader or loaded at start; 0: none).",
        (),
        "",
    ),
    MetricSpec(
        "raftmeta_raft_damaged_batches",
        "gauge",
        "batches",
        "Batches of this node's log found damaged and not repaired yet (a damaged range of several batches"
        " counts once, and so does a damaged snapshot with no fallback until the leader's is installed);"
        " it vouches for nothing from the first on.",
        (),
        "",
    ),
    MetricSpec(
        "raftmeta_raft_repairs_total",
        "counter",
        "batches",
        "Damaged batches this node repaired in place from a peer's intact copy since it started"
        " (each batch of a damaged range once).",
        (),
        "",
    ),
)

CONTROLLER: tuple[MetricSpec, ...] = (
    MetricSpec(
        "raftmeta_controller_active_controller_count",
        "gauge",
        "",
        "1 on the leader once its controller answers requests (its epoch's first batch committed), else 0.",
        (),
        "ActiveControllerCount",
    ),
    MetricSpec(
        "raftmeta_controller_fenced_broker_count",
        "gauge",
        "brokers",
        "Registered brokers that are fenced.",
        (),
        "FencedBrokerCount",
    ),
    MetricSpec(
        "raftmeta_controller_active_broker_count",
        "gauge",
        "brokers",
        "Registered brokers that are not fenced.",
        (),
        "ActiveBrokerCount",
    ),
    MetricSpec(
        "raftmeta_controller_global_topic_count", "gauge", "topics", "Topics in the image.", (), "GlobalTopicCount"
    ),
    MetricSpec(
        "raftmeta_controller_global_partition_count",
        "gauge",
        "partitions",
        "Partitions in the image.",
        (),
        "GlobalPartitionCount",
    ),
    MetricSpec(
        "raftmeta_controller_offline_partitions_count",
        "gauge",
        "partitions",
        "Partitions without a leader (-1).",
        (),
        "OfflinePartitionsCount",
    ),
    MetricSpec(
        "raftmeta_controller_preferred_replica_imbalance_count",
        "gauge",
        "partitions",
        "Partitions whose leader is not their preferred (first) replica.",
        (),
        "PreferredReplicaImbalanceCount",
    ),
    MetricSpec(
        "raftmeta_controller_under_replicated_partitions",
        "gauge",
        "partitions",
        "Partitions whose ISR is smaller than their replica set.",
        (),
        "UnderReplicatedPartitions",
    ),
    MetricSpec(
        "raftmeta_controller_event_queue_time_seconds",
        "histogram",
        "seconds",
        "Time an admin request waited in the node's inbox before the controller took it.",
        (),
        "EventQueueTimeMs",
    ),
    MetricSpec(
        "raftmeta_controller_event_queue_processing_time_seconds",
        "histogram",
        "seconds",
        "Time the controller spent handling one admin request (validation, placement, records).",
        (),
        "EventQueueProcessingTimeMs",
    ),
    MetricSpec(
        "raftmeta_controller_last_applied_record_offset",
        "gauge",
        "",
        "Offset of the last record applied to this node's committed image.",
        (),
        "LastAppliedRecordOffset",
    ),
    MetricSpec(
        "raftmeta_controller_last_committed_record_offset",
        "gauge",
        "",
        "Offset of the last committed record (high watermark - 1).",
        (),
        "LastCommittedRecordOffset",
    ),
    MetricSpec(
        "raftmeta_controller_last_applied_record_lag_records",
        "gauge",
        "records",
        "Committed records not yet applied to the image (last committed - last applied).",
        (),
        "LastAppliedRecordLagMs",
    ),
    MetricSpec(
        "raftmeta_controller_metadata_errors_total",
        "counter",
        "",
        "Requests the controller failed on (an internal error; the node logs each).",
        (),
        "MetadataErrorCount",
    ),
)

GRPC: tuple[MetricSpec, ...] = (
    MetricSpec(
        "raftmeta_grpc_requests_total",
        "counter",
        "calls",
        "gRPC calls received, by service and method.",
        ("service", "method"),
        "grpc_server_started_total",
    ),
    MetricSpec(
        "raftmeta_grpc_errors_total",
        "counter",
        "calls",
        "gRPC calls that ended with a status other than OK, by status code and raftmeta-error-code (Kafka's name).",
        ("service", "method", "code", "error_code"),
        "grpc_server_handled_total{grpc_code!=OK}",
    ),
    MetricSpec(
        "raftmeta_grpc_request_duration_seconds",
        "histogram",
        "seconds",
        "Server-side latency of unary gRPC calls (streams are counted, not timed).",
        ("service", "method"),
        "grpc_server_handling_seconds",
    ),
)

ALL: tuple[MetricSpec, ...] = (*RAFT, *CONTROLLER, *GRPC)
BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in ALL}
BY_FAMILY: dict[str, MetricSpec] = {spec.family: spec for spec in ALL}


def spec(name: str) -> MetricSpec:
    return BY_NAME[name]
