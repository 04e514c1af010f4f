"""A node's configuration: identity, the static voter set, timeouts and limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from raftmeta.api.addresses import parse_host_port
from raftmeta.api.limits import KAFKA_FRAME_TIMEOUT_MS_DEFAULT, KAFKA_QUEUED_REQUEST_BYTES_DEFAULT
from raftmeta.controller.result import ControllerConfig
from raftmeta.server.peers import FetchRpc
from raftmeta.storage.log import DEFAULT_SEGMENT_BYTES
from raftmeta.tls import TlsConfig


def parse_voters(text: str) -> dict[int, str]:
    """Kafka's controller.quorum.voters format ``1@host:port,2@host:port`` → {id: "host:port"}."""
    voters: dict[int, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, at, address = item.partition("@")
        if not at or not node.strip().isdigit():
            raise ValueError(f"voter {item!r} is not ID@HOST:PORT (e.g. 1@127.0.0.1:9093)")
        parse_host_port(address, f"voter {item!r}:")
        node_id = int(node)
        if node_id in voters:
            raise ValueError(f"voter id {node_id} appears twice")
        voters[node_id] = address
    if not voters:
        raise ValueError("the voter list is empty: expected ID@HOST:PORT[,ID@HOST:PORT...]")
    return voters


def parse_initial_controllers(text: str) -> tuple[dict[int, str], dict[int, bytes]]:
    """Kafka's ``--initial-controllers`` format ``1@host:port:DIRECTORY_ID,...`` → the voters'
    addresses and directory ids (22 characters each, as meta.properties prints them)."""
    from raftmeta.raft.voters import parse_directory_id

    addresses: list[str] = []
    directory_ids: dict[int, bytes] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        head, colon, directory = item.rpartition(":")
        if not colon or ":" not in head:
            raise ValueError(f"controller {item!r} is not ID@HOST:PORT:DIRECTORY_ID")
        node = head.partition("@")[0]
        try:
            raw = parse_directory_id(directory)
        except ValueError as exc:
            raise ValueError(f"controller {item!r}: {exc}") from None
        addresses.append(head)
        if node.strip().isdigit():
            directory_ids[int(node)] = raw
    voters = parse_voters(",".join(addresses))
    if len(set(directory_ids.values())) != len(directory_ids):
        raise ValueError("two controllers have the same directory id: each voter's directory is its own")
    return voters, directory_ids


def format_voters(voters: dict[int, str]) -> str:
    return ",".join(f"{node_id}@{address}" for node_id, address in sorted(voters.items()))


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    listen: str
    voters: dict[int, str]
    data_dir: Path
    cluster_id: str
    repair_log: bool = False
    # Consensus timeouts (Kafka's controller.quorum.* defaults).
    fetch_timeout_ms: int = 2000
    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_max_wait_ms: int = 500
    # The leader holds a Fetch that would carry only a new high watermark this long, for records
    # to send with it (RaftConfig.fetch_hw_linger_ms): one Fetch round per commit, not two.
    fetch_hw_linger_ms: int = 5
    request_timeout_ms: int = 1000
    # Take a snapshot of the metadata image after this many committed records.
    snapshot_interval_records: int = 10_000
    # Roll the log to a new segment past this size; segments wholly below a snapshot are deleted,
    # so small segments (tests) make a snapshot free disk space sooner.
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    # How long a resigning leader (SIGTERM) waits for the other voters to acknowledge its
    # EndQuorumEpoch before it stops, so that they elect at once rather than after a fetch timeout.
    resign_timeout_ms: int = 1000
    # How often the leader's controller looks for broker sessions that timed out.
    tick_interval_ms: int = 250
    # Bounds: queued inputs of the node task and admin requests waiting for a commit.
    inbox_max: int = 10_000
    pending_requests_max: int = 4096
    # How long a non-leader waits for a leader to appear before answering NOT_CONTROLLER.
    forward_wait_ms: int = 5000
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    # TLS of the raft listener (``listen``): its certificate, and with a CA, client certificates
    # required (mutual TLS). The same certificate and CA serve our own calls to the other voters
    # (RaftService and forwarded ControllerService calls). None: plaintext.
    tls: TlsConfig | None = None
    # An optional second listener for clients (ControllerService, health, reflection) with its own
    # TLS; without it the raft listener serves clients too.
    client_listen: str | None = None
    client_tls: TlsConfig | None = None
    # How this node sends its Fetches to the leader: one long-lived FetchStream (default) or a
    # unary Fetch per round (what generic clients use; kept for A/B benchmarks and old peers).
    fetch_rpc: FetchRpc = "stream"
    # HOST:PORT of the Kafka wire-protocol admin listener (docs/kafka-protocol.md); None: off.
    # ``kafka_peers`` are the other nodes' Kafka listeners ({id: "host:port"}), listed as brokers
    # in Metadata answers so a client can use any of them.
    kafka_listener: str | None = None
    kafka_peers: dict[int, str] = field(default_factory=dict)
    # The Kafka listener's budget of buffered request bytes across connections (Kafka's
    # queued.max.request.bytes) and its deadline for a frame to arrive once its size is read.
    kafka_queued_max_request_bytes: int = KAFKA_QUEUED_REQUEST_BYTES_DEFAULT
    kafka_frame_timeout_ms: int = KAFKA_FRAME_TIMEOUT_MS_DEFAULT
    # The bootstrap voters' directory ids (--initial-controllers / --standalone; KIP-853): the set
    # in force until the log has a VotersRecord, with every voter's replica key.
    voter_directory_ids: dict[int, bytes] = field(default_factory=dict)
    # Addresses of nodes that are not bootstrap voters ({id: "host:port"}): they win over the
    # listener a VotersRecord names when such a node becomes a voter (a proxy in between).
    peer_addresses: dict[int, str] = field(default_factory=dict)
    # HOST:PORT of the Prometheus endpoint (docs/metrics.md); None: no endpoint.
    metrics_listen: str | None = None
    # Deliberate bugs, for proving that the chaos checker catches lost acknowledged writes. Never
    # set outside tests: each one breaks durability (DESIGN.md §9, invariant 6).
    unsafe_ack_before_commit: bool = False  # answer admin requests as soon as they are proposed
    unsafe_skip_fsync: bool = False  # report appends as durable without fsyncing them

    def __post_init__(self) -> None:
        if self.node_id < 0:
            raise ValueError(f"--node-id must be >= 0, got {self.node_id}")
        if self.snapshot_interval_records < 1:
            raise ValueError("--snapshot-interval-records must be >= 1")
        if self.segment_bytes < 1024:
            raise ValueError(f"--segment-bytes must be >= 1024, got {self.segment_bytes}")
        if not self.cluster_id:
            raise ValueError("a cluster id is required")
        if self.tls is not None:
            self.tls.require_server_identity()
        if self.client_tls is not None:
            if self.client_listen is None:
                given = self.client_tls.flag("cert" if self.client_tls.cert is not None else "ca")
                raise ValueError(f"{given} needs --client-listen: it sets the TLS of the client listener")
            self.client_tls.require_server_identity()
        if self.client_listen is not None and self.client_listen == self.listen:
            raise ValueError(f"--client-listen must differ from --listen ({self.listen})")
