"""Fuzz of the Kafka listener of a real quorum (``raftmeta fuzz --target kafka``).

Inputs are valid requests of every API the listener serves, at every advertised version, damaged
by one to four mutations (bit flips, bytes set to boundary values, truncation, insertions,
appended bytes), each sent on a fresh connection to a random node, size-prefixed as a client
would (a truncated frame is sent with the size of its whole, then the client goes away).

Verdicts. The reference is the frame itself: kio, from Kafka's schemas, decides whether it is a
request (the listener decodes it with the same library, so this checks the listener's handling,
not kio). A frame that is not a request must be refused -- the connection closed, or ApiVersions
answered in v0 -- and write nothing: the quorum's high watermark does not move (the quorum runs
without brokers, so nothing else writes). A request must get one answer frame with its
correlation id, decodable as that API's response at that version. Any other outcome, a hang, a
node that exits or logs an error, or a log that does not replay cleanly is a failure.
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.serial import entity_reader

from raftmeta.api.addresses import parse_host_port
from raftmeta.client import RetryPolicy, SyncControllerClient
from raftmeta.fuzz.report import TargetReport
from raftmeta.fuzz.rounds import fuzz_round
from raftmeta.kafka.framing import FrameError, UnsupportedVersion, decode_request
from raftmeta.kafka.requests import encode_request
from raftmeta.kafka.versions import API_VERSIONS_KEY, SUPPORTED
from raftmeta.local import quorum as local_quorum
from raftmeta.v1 import controller_pb2

ANSWER_TIMEOUT_S: Final = 30.0  # generous: a loaded 2-core CI machine is slow, a hang is forever
NODE_ARGS: Final = ["--fetch-timeout-ms", "1000", "--election-timeout-ms", "500"]
SETTLING_BROKER_ID: Final = 2_000_000_000  # named by no sample request
EVERY_VERSION: Final = [(key, v) for key, (low, high) in sorted(SUPPORTED.items()) for v in range(low, high + 1)]

# One request per API, as values with the union of every version's fields (kio's classes keep the
# ones their version has). Topic names are the fuzz's own, so a damaged request that still
# decodes touches nothing a user made.
SAMPLE_REQUESTS: Final[dict[int, dict[str, Any]]] = {
    1: {"cluster_id": "test-cluster-id-000000", "replica_id": 5,
        "replica_state": {"replica_id": 5, "replica_epoch": -1}, "max_wait": 500, "min_bytes": 0,
        "max_bytes": 8388608, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": "__cluster_metadata", "topic_id": uuid.UUID(int=1), "partitions": [
            {"partition": 0, "current_leader_epoch": 1, "fetch_offset": 0, "last_fetched_epoch": 0,
             "log_start_offset": -1, "partition_max_bytes": 8388608, "replica_directory_id": uuid.UUID(int=9),
             "high_watermark": 9223372036854775807}]}]},
    3: {"topics": [{"name": "orders", "topic_id": None}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
    18: {"client_software_name": "tests", "client_software_version": "1.0"},
    19: {"topics": [{"name": "orders", "num_partitions": 3, "replication_factor": 2, "assignments": [],
                     "configs": [{"name": "retention.ms", "value": "1000"}]}],
         "timeout": 5000, "validate_only": False},
    20: {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}], "topic_names": ["orders"], "timeout": 5000},
    32: {"resources": [{"resource_type": 2, "resource_name": "orders", "configuration_keys": None}],
         "include_synonyms": False, "include_documentation": False},
    33: {"resources": [{"resource_type": 2, "resource_name": "orders",
                        "configs": [{"name": "retention.ms", "value": "5000"}]}],
         "validate_only": False},
    35: {"topics": [{"topic": "orders", "partitions": [0, 1]}]},
    37: {"topics": [{"name": "orders", "count": 5, "assignments": None}], "timeout": 5000, "validate_only": False},
    43: {"election_type": 0, "topic_partitions": [{"topic": "orders", "partitions": [0, 1]}], "timeout": 5000},
    44: {"resources": [{"resource_type": 2, "resource_name": "orders",
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "5000"}]}],
         "validate_only": False},
    45: {"timeout": 5000, "allow_replication_factor_change": False,
         "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [3, 4]}]}]},
    46: {"timeout": 5000, "topics": None},
    55: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
    56: {"broker_id": 1, "broker_epoch": 10,
         "topics": [{"topic_id": uuid.UUID(int=0x00112233445566778899AABBCCDDEEFF), "partitions": [
             {"partition_index": 0, "leader_epoch": 1, "partition_epoch": 2, "leader_recovery_state": 0,
              "new_isr": [1, 2], "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 10},
                                                         {"broker_id": 2, "broker_epoch": -1}]}]}]},
    60: {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False},
    59: {"cluster_id": "test-cluster-id-000000", "replica_id": 5, "max_bytes": 8388608,
         "topics": [{"name": "__cluster_metadata", "partitions": [
             {"partition": 0, "current_leader_epoch": 3, "snapshot_id": {"end_offset": 10, "epoch": 3},
              "position": 0, "replica_directory_id": uuid.UUID(int=9)}]}]},
    62: {"broker_id": 1, "cluster_id": "test-cluster-id-000000", "incarnation_id": uuid.UUID(int=0x1234),
         "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092, "security_protocol": 0}],
         "features": [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 27}],
         "rack": "r1", "is_migrating_zk_broker": False, "log_dirs": [uuid.UUID(int=0x5678 << 64)],
         "previous_broker_epoch": -1},
    63: {"broker_id": 1, "broker_epoch": 10, "current_metadata_offset": 42, "want_fence": False,
         "want_shut_down": False, "offline_log_dirs": [], "cordoned_log_dirs": []},
    67: {"broker_id": 1, "broker_epoch": 10},
    73: {"broker_id": 1, "broker_epoch": 10,
         "directories": [{"id_": uuid.UUID(int=0x5678 << 64), "topics": [
             {"topic_id": uuid.UUID(int=0x00112233445566778899AABBCCDDEEFF),
              "partitions": [{"partition_index": 0}, {"partition_index": 1}]}]}]},
    75: {"topics": [{"name": "orders"}], "response_partition_limit": 2000, "cursor": None},
    80: {"cluster_id": None, "timeout": 30000, "voter_id": 4, "voter_directory_id": uuid.UUID(int=7),
         "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 9094}]},
    81: {"cluster_id": None, "voter_id": 4, "voter_directory_id": uuid.UUID(int=7)},
}  # fmt: skip


def request_frame(api_key: int, version: int, values: dict[str, Any], correlation_id: int = 7) -> bytes:
    """A request without its size prefix: the version's header and the body built from ``values``."""
    return encode_request(api_key, version, values, correlation_id, "raftmeta-fuzz")


# Envelope: a broker forwarding the sample CreateTopics (built from it, so after the table).
SAMPLE_REQUESTS[58] = {
    "request_data": request_frame(19, 7, SAMPLE_REQUESTS[19], correlation_id=11),
    "request_principal": b"",
    "client_host_address": bytes([127, 0, 0, 1]),
}


@dataclass(frozen=True)
class KafkaCase:
    api_key: int
    version: int
    frame: bytes  # without the size prefix
    mutations: tuple[str, ...]
    node_index: int

    def describe(self) -> dict[str, Any]:
        return {"api_key": self.api_key, "version": self.version, "mutations": list(self.mutations),
                "frame": self.frame[:256].hex()}  # fmt: skip


@st.composite
def kafka_cases(draw: st.DrawFn) -> KafkaCase:
    api_key, version = draw(st.sampled_from(EVERY_VERSION))
    frame = bytearray(request_frame(api_key, version, SAMPLE_REQUESTS[api_key]))
    mutations: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "append"]))
        at = draw(st.integers(0, max(0, len(frame) - 1)))
        if kind == "flip" and frame:
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and frame:
            frame[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del frame[at:]
        elif kind == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            frame += draw(st.binary(min_size=1, max_size=8))
        mutations.append(f"{kind}@{at}")
    return KafkaCase(api_key, version, bytes(frame), tuple(mutations), draw(st.integers(0, 8)))


def expected(frame: bytes) -> tuple[str, tuple[int, int, int] | None]:
    """("request", (key, version, correlation id)), ("api-versions-v0", (18, 0, id)) or ("refused", None)."""
    try:
        request = decode_request(frame)
    except UnsupportedVersion as exc:
        if exc.api_key == API_VERSIONS_KEY:
            return "api-versions-v0", (API_VERSIONS_KEY, 0, exc.correlation_id)
        return "refused", None
    except FrameError:
        return "refused", None
    return "request", (request.api_key, request.api_version, request.correlation_id)


def _read_answer(sock: socket.socket) -> bytes:
    """Everything the node sends until it closes or one whole frame has arrived."""
    data = b""
    while True:
        if len(data) >= 4 and len(data) >= 4 + int.from_bytes(data[:4], "big"):
            return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


class KafkaFuzzer:
    """Start with :meth:`start`, call :meth:`run_round` until done, then :meth:`finish`."""

    name = "kafka"

    def __init__(self, data_dir: Path, nodes: int = 3) -> None:
        self.data_dir = data_dir
        self.nodes = nodes
        self.report = TargetReport(self.name)
        self.quorum: local_quorum.LocalQuorum | None = None
        self._client: SyncControllerClient | None = None

    def start(self) -> None:
        self.quorum = local_quorum.up(self.data_dir, nodes=self.nodes, node_args=NODE_ARGS, kafka=True)
        self._client = SyncControllerClient(self.quorum.bootstrap_server, retry=RetryPolicy(deadline_s=20))
        # A fresh controller writes metadata.version on its own once it activates, ahead of the
        # requests it held: the high watermark a refused frame must leave alone is the one after
        # that. A broker registered, then unregistered, is answered once its records commit
        # behind it (found at load 20: the first frame was blamed for the controller's own write).
        self._client.register_broker(
            controller_pb2.RegisterBrokerRequest(broker_id=SETTLING_BROKER_ID, incarnation_id=uuid.uuid4().bytes)
        )
        self._client.unregister_broker(controller_pb2.UnregisterBrokerRequest(broker_id=SETTLING_BROKER_ID))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.quorum is not None:
            local_quorum.down(self.quorum)

    def _high_watermark(self) -> int:
        assert self._client is not None
        return int(self._client.describe_quorum().high_watermark)

    def exercise(self, case: KafkaCase) -> None:
        assert self.quorum is not None
        node = self.quorum.nodes[case.node_index % len(self.quorum.nodes)]
        assert node.kafka_address is not None
        verdict, ids = expected(case.frame)
        before = self._high_watermark() if verdict == "refused" else None
        # A cut frame keeps the size of the whole, as a client that dies mid-send.
        size = len(case.frame) + (1 if case.mutations[-1].startswith("cut") else 0)
        self.report.examples += 1
        try:
            with socket.create_connection(
                parse_host_port(node.kafka_address, f"node {node.id}'s Kafka address"), timeout=ANSWER_TIMEOUT_S
            ) as sock:
                sock.sendall(size.to_bytes(4, "big") + case.frame)
                if size != len(case.frame):
                    sock.shutdown(socket.SHUT_WR)
                answer = _read_answer(sock)
        except TimeoutError:
            self.report.fail("hang", f"node {node.id} neither answered nor closed", case.describe())
            return
        except ConnectionResetError:
            answer = b""  # closed without reading everything we sent: still a close
        self.report.count(verdict)
        if verdict == "refused" or size != len(case.frame):
            if answer:
                self.report.fail("answered garbage", f"node {node.id} answered a frame that is no request",
                                 {**case.describe(), "answer": answer[:64].hex()})  # fmt: skip
            if before is not None and self._high_watermark() != before:
                self.report.fail("wrote", f"a refused frame moved the high watermark from {before}", case.describe())
            return
        assert ids is not None
        api_key, version, correlation_id = ids
        try:
            response_type = load_response_schema(api_key, version)
            header, header_size = entity_reader(response_type.__header_schema__)(answer, 4)
            entity_reader(response_type)(answer, 4 + header_size)
        except Exception as exc:
            self.report.fail("bad answer", f"node {node.id}: {type(exc).__name__}: {exc}",
                             {**case.describe(), "answer": answer[:64].hex()})  # fmt: skip
            return
        if header.correlation_id != correlation_id:
            self.report.fail("bad answer", f"correlation id {header.correlation_id}, sent {correlation_id}",
                             case.describe())  # fmt: skip

    def run_round(self, seed: int, examples: int, deadline: float) -> None:
        @fuzz_round(seed, examples)
        @given(kafka_cases())
        def one(case: KafkaCase) -> None:
            if time.monotonic() < deadline:
                self.exercise(case)

        one()
        self._check_processes()

    def _check_processes(self) -> None:
        assert self.quorum is not None
        for node in self.quorum.nodes:
            if not local_quorum.alive(node.pid):
                self.report.fail("crash", f"node {node.id} exited")
                local_quorum.restart(self.quorum, node.id)
                local_quorum.wait_for_leader(self.quorum, 30.0)

    def finish(self) -> TargetReport:
        """Every node alive, then stop the quorum: no node may have logged an error, and every
        node's log must replay cleanly."""
        from raftmeta.fuzz.controller import _error_lines
        from raftmeta.fuzz.logcheck import check_node_log

        assert self.quorum is not None
        self._check_processes()
        self.close()
        for node in self.quorum.nodes:
            for line in _error_lines(Path(node.log)):
                self.report.fail("node log", f"node {node.id} logged: {line}")
            log = check_node_log(Path(node.data_dir))
            self.report.count(f"replayed:{log.label}:records", log.records)
            for problem in log.problems:
                self.report.fail("replay", f"{log.label}: {problem}")
        return self.report
