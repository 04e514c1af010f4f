"""The ControllerService fuzzer: fuzzed requests against real node processes.

A real process is the honest check that "the node never crashes": an exception that escapes a
handler kills the node task, which an in-process harness would only see as a raised exception.
:class:`ControllerFuzzer` starts a local quorum (3 voters and a small simulated broker fleet, via
:mod:`raftmeta.local.quorum`), then, round after round, sends every ControllerService method
fuzzed requests (:mod:`raftmeta.fuzz.requests`) to a node drawn per request -- so forwarding to
the leader is fuzzed too -- and judges each reply (:mod:`raftmeta.fuzz.outcomes`). After every
request it checks that every node process is alive; after every round, that each answers the
standard health check. A node that died is a failure (with the requests just sent and the end of
its log) and is restarted so the run goes on.

While it runs, the committed log is copied onto a tape (:class:`raftmeta.chaos.tape.CommittedTape`)
every few requests, with every snapshot the nodes write, since nodes delete their segments below
each snapshot. :meth:`ControllerFuzzer.finish` stops the quorum and checks what it left behind: no
node logged an error or a traceback, the tape and every node's files replay cleanly with
invariant 7 on every state (:mod:`raftmeta.fuzz.logcheck`), the nodes' committed batches agree
(the verify job's single-process consistency checks), and no request id that only ever got
errors is in the log (a refused request writes nothing).
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import text_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import given
from hypothesis import strategies as st

from raftmeta.api.limits import grpc_channel_options
from raftmeta.chaos.tape import CommittedTape
from raftmeta.client import ClientError, RetryPolicy, SyncControllerClient
from raftmeta.fuzz.logcheck import LogReport, check_batches, check_node_log
from raftmeta.fuzz.outcomes import Reply, judge
from raftmeta.fuzz.report import TargetReport
from raftmeta.fuzz.requests import METHODS, ClusterView, FuzzRequest, requests
from raftmeta.fuzz.rounds import fuzz_round
from raftmeta.local import quorum as local_quorum
from raftmeta.storage.datadir import LOG_DIR_NAME
from raftmeta.storage.errors import SnapshotError
from raftmeta.storage.snapshot import SNAPSHOT_SUFFIX, Snapshot, parse_snapshot_name, read_snapshot
from raftmeta.v1 import controller_pb2

# Quick elections and a short broker session (the fuzz's own brokers, which never heartbeat on
# their own, get fenced within a round); snapshots every 5,000 records, so that a run of a few
# minutes takes some and the log check replays across them.
NODE_ARGS = (
    "--fetch-timeout-ms", "1000", "--election-timeout-ms", "500", "--session-timeout-ms", "4500",
    "--snapshot-interval-records", "5000",
)  # fmt: skip
# Topics kept at most: past it, the oldest are deleted between rounds (DESCRIBE of every topic,
# placement and the log check all grow with the number of topics).
TOPICS_MAX = 120
RECENT_REQUESTS = 5
# Requests between two copies of the committed log onto the tape.
TAPE_EVERY = 10
REQUEST_TEXT_MAX = 2000
RESTART_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class ControllerFuzzConfig:
    nodes: int = 3
    brokers: int = 6
    racks: int = 3
    pools: tuple[str, ...] = ("fast=0-2",)
    # Per call. Generous: a defined answer that takes longer than this is a finding (a request
    # that can stall the controller), not a slow machine.
    call_timeout_s: float = 15.0
    node_args: tuple[str, ...] = NODE_ARGS
    heartbeat_interval_ms: int = 200


def request_text(request: Message) -> str:
    text = text_format.MessageToString(request, as_one_line=True)
    return text if len(text) <= REQUEST_TEXT_MAX else text[:REQUEST_TEXT_MAX] + " ..."


@dataclass
class _Sent:
    method: str
    node: int
    request: Message

    def describe(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "node": self.node,
            "request": request_text(self.request),
            "request_hex": self.request.SerializeToString().hex(),
        }


@dataclass
class _RequestIdState:
    succeeded: bool = False
    indeterminate: bool = False
    methods: set[str] = field(default_factory=set)


class ControllerFuzzer:
    """Start with :meth:`start`, call :meth:`run_round` until done, then :meth:`finish`."""

    name = "controller"

    def __init__(self, data_dir: Path, config: ControllerFuzzConfig | None = None) -> None:
        self.data_dir = data_dir
        self.config = config or ControllerFuzzConfig()
        self.report = TargetReport(self.name)
        self.quorum: local_quorum.LocalQuorum | None = None
        self.view = ClusterView()
        self._channels: dict[int, grpc.Channel] = {}
        self._recent: deque[_Sent] = deque(maxlen=RECENT_REQUESTS)
        self.tape: CommittedTape | None = None
        self.snapshots: dict[int, Snapshot] = {}
        self._request_ids: dict[str, _RequestIdState] = {}

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        self.quorum = local_quorum.up(
            self.data_dir,
            nodes=cfg.nodes,
            brokers=cfg.brokers,
            racks=cfg.racks,
            pools=list(cfg.pools),
            node_args=list(cfg.node_args),
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
        )
        self.tape = CommittedTape({n.id: Path(n.data_dir) for n in self.quorum.nodes})
        self.refresh_view()

    def _channel(self, node_id: int) -> grpc.Channel:
        channel = self._channels.get(node_id)
        if channel is None:
            assert self.quorum is not None
            channel = grpc.insecure_channel(self.quorum.node(node_id).address, options=grpc_channel_options())
            self._channels[node_id] = channel
        return channel

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        if self.quorum is not None:
            local_quorum.down(self.quorum)

    # ---- one request ----------------------------------------------------------------------------
    def send(self, node_id: int, method: str, request: Message) -> Reply:
        """Call ``method`` on ``node_id`` once (no retries: every answer is judged)."""
        _, response_type = METHODS[method]
        rpc = self._channel(node_id).unary_unary(
            f"/raftmeta.v1.ControllerService/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        try:
            response = rpc(request, timeout=self.config.call_timeout_s)
        except grpc.RpcError as exc:
            return Reply.from_error(exc)
        return Reply(grpc.StatusCode.OK, response=response)

    def exercise(self, fuzzed: FuzzRequest, node_index: int) -> None:
        """Send one fuzzed request, judge the reply, and check the processes are still alive."""
        assert self.quorum is not None
        node_id = self.quorum.nodes[node_index % len(self.quorum.nodes)].id
        method, request = fuzzed.method, fuzzed.request
        request_id: str = getattr(request, "request_id", "")
        state = self._request_ids.get(request_id) if request_id else None
        reused = state is not None
        sent = _Sent(method, node_id, request)
        self._recent.append(sent)
        reply = self.send(node_id, method, request)
        verdict = judge(method, request, reply, request_id_reused=reused)
        self.report.examples += 1
        self.report.count(f"kind:{fuzzed.kind}")
        self.report.count(f"{method}:{'success' if verdict.succeeded else 'error'}")
        for label in verdict.labels:
            self.report.count(label)
        if request_id:
            state = self._request_ids.setdefault(request_id, _RequestIdState())
            state.succeeded |= verdict.succeeded
            state.indeterminate |= verdict.indeterminate
            state.methods.add(method)
            if request_id not in self.view.request_ids:
                # Let later examples reuse it (retries, and an id reused for another method).
                self.view = _with_request_id(self.view, request_id)
        for problem in verdict.problems:
            self.report.fail("reply", f"{method}: {problem}", {**sent.describe(), "reply": _reply_text(reply)})
        self.check_processes()
        if self.report.examples % TAPE_EVERY == 0:
            self.poll_tape()

    def poll_tape(self) -> None:
        """Copy what became committed: often enough that a snapshot rarely compacts batches first."""
        if self.tape is None or self.quorum is None:
            return
        leader = self.quorum.nodes[0].id
        try:
            status = self.send(leader, "DescribeQuorum", controller_pb2.DescribeQuorumRequest()).response
        except grpc.RpcError:
            status = None
        if isinstance(status, controller_pb2.DescribeQuorumResponse) and status.leader_id >= 0:
            # The leader's log below its high watermark is committed: fresher than its checkpoint.
            self.tape.leader_hint = (status.leader_id, status.high_watermark)
        self.tape.poll()
        for node in self.quorum.nodes:
            self._copy_snapshots(Path(node.data_dir) / LOG_DIR_NAME)

    def _copy_snapshots(self, log_dir: Path) -> None:
        """Keep every snapshot a node writes (it keeps only its two newest): the tape replay resumes
        from one where the tape has a gap."""
        for path in log_dir.glob(f"*{SNAPSHOT_SUFFIX}"):
            snapshot_id = parse_snapshot_name(path.name)
            if snapshot_id is None or snapshot_id.offset in self.snapshots:
                continue
            try:
                self.snapshots[snapshot_id.offset] = read_snapshot(path)
            except (SnapshotError, OSError):
                continue  # pruned under us, or being replaced: a newer one will do

    # ---- health ---------------------------------------------------------------------------------
    def check_processes(self) -> None:
        """Every node process alive; a dead one is a failure (and is restarted)."""
        assert self.quorum is not None
        for node in self.quorum.nodes:
            if local_quorum.alive(node.pid):
                continue
            self.report.fail(
                "crash",
                f"node {node.id} exited",
                {"recent_requests": [s.describe() for s in self._recent], "log_tail": _log_tail(Path(node.log))},
            )
            channel = self._channels.pop(node.id, None)
            if channel is not None:
                channel.close()
            local_quorum.restart(self.quorum, node.id)
            local_quorum.wait_for_leader(self.quorum, RESTART_TIMEOUT_S)
            self._wait_serving(node.id)
        if self.quorum.brokers_pid is not None and not local_quorum.alive(self.quorum.brokers_pid):
            self.report.fail("crash", "the simulated broker fleet exited", {"log_tail": _log_tail(self._fleet_log())})
            self.quorum.brokers_pid = None

    def _wait_serving(self, node_id: int) -> None:
        """Until a restarted node answers its health check (its requests would fail meanwhile)."""
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        health = health_pb2_grpc.HealthStub(self._channel(node_id))
        while time.monotonic() < deadline:
            try:
                answer = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0, wait_for_ready=True)
            except grpc.RpcError:
                continue
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
                return
            time.sleep(0.1)

    def check_health(self) -> None:
        """Each node answers the standard gRPC health check with SERVING."""
        assert self.quorum is not None
        for node in self.quorum.nodes:
            try:
                answer = health_pb2_grpc.HealthStub(self._channel(node.id)).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=self.config.call_timeout_s
                )
            except grpc.RpcError as exc:
                self.report.fail("health", f"node {node.id} health check failed: {Reply.from_error(exc).status.name}")
                continue
            if answer.status != health_pb2.HealthCheckResponse.SERVING:
                self.report.fail(
                    "health",
                    f"node {node.id} health: {health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)}",
                )

    # ---- rounds ---------------------------------------------------------------------------------
    def refresh_view(self) -> None:
        """Describe the cluster again (valid requests are built from it); delete old topics past
        :data:`TOPICS_MAX` so a long run does not slow down as the metadata grows."""
        assert self.quorum is not None
        policy = RetryPolicy(deadline_s=self.config.call_timeout_s)
        try:
            with SyncControllerClient(self.quorum.bootstrap_server, retry=policy) as client:
                topics = client.describe_topics()
                if len(topics.topics) > TOPICS_MAX:
                    excess = [t.name for t in topics.topics[: len(topics.topics) - TOPICS_MAX // 2]]
                    client.delete_topics(controller_pb2.DeleteTopicsRequest(topic_names=excess))
                    topics = client.describe_topics()
                cluster = client.describe_cluster()
        except ClientError as exc:
            self.report.fail("health", f"describing the cluster failed: {exc}")
            return
        ids = list(self.view.request_ids)[-200:]
        self.view = ClusterView.from_responses(topics, cluster, ids)

    def run_round(self, seed: int, examples: int, deadline: float) -> None:
        """Up to ``examples`` fuzzed requests drawn with ``seed``, stopping at ``deadline``
        (time.monotonic)."""
        node_count = self.config.nodes
        strategy = st.tuples(requests(self.view), st.integers(0, node_count - 1))

        @fuzz_round(seed, examples)
        @given(strategy)
        def one(example: tuple[FuzzRequest, int]) -> None:
            if time.monotonic() < deadline:
                self.exercise(*example)

        one()
        self.check_health()
        self.refresh_view()
        self.poll_tape()

    # ---- the end --------------------------------------------------------------------------------
    def finish(self) -> TargetReport:
        """Health, then stop the quorum and check every node's logs and data."""
        assert self.quorum is not None
        self.check_processes()
        self.check_health()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        local_quorum.down(self.quorum)
        for node in self.quorum.nodes:
            for line in _error_lines(Path(node.log)):
                self.report.fail("node log", f"node {node.id} logged: {line}")
        logged_ids: set[str] = set()
        checked = [check_node_log(Path(node.data_dir)) for node in self.quorum.nodes]
        if self.tape is not None:
            self.tape.poll()
            for node in self.quorum.nodes:
                self._copy_snapshots(Path(node.data_dir) / LOG_DIR_NAME)
            checked.append(check_batches(self.tape.batches, self.snapshots))
            for conflict in self.tape.conflicts:
                self.report.fail("consistency", conflict)
        for log in checked:
            self._note_log(log)
            logged_ids |= log.request_ids
        for check in _consistency_checks(self.data_dir):
            self.report.fail("consistency", check)
        for request_id, state in self._request_ids.items():
            if request_id in logged_ids and not state.succeeded and not state.indeterminate:
                self.report.fail(
                    "refused request written",
                    f"request id {request_id!r} ({', '.join(sorted(state.methods))}) only ever got errors, "
                    "but a RequestRecord for it is in the log",
                )
        return self.report

    def _note_log(self, log: LogReport) -> None:
        self.report.count(f"replayed:{log.label}:batches", log.batches)
        self.report.count(f"replayed:{log.label}:records", log.records)
        self.report.notes.extend(f"{log.label}: {note}" for note in log.notes)
        for problem in log.problems:
            self.report.fail("replay", problem)
        if log.problems_total > len(log.problems):
            self.report.fail("replay", f"{log.label}: {log.problems_total - len(log.problems)} more replay problems")

    def _fleet_log(self) -> Path:
        return self.data_dir / "logs" / "brokers.log"


def _with_request_id(view: ClusterView, request_id: str) -> ClusterView:
    ids = (*view.request_ids[-199:], request_id)
    return ClusterView(view.topics, view.brokers, view.pools, ids, view.adding)


def _reply_text(reply: Reply) -> str:
    if reply.response is not None:
        return request_text(reply.response)
    return f"{reply.status.name}{'/' + reply.error_code if reply.error_code else ''}: {reply.details}"


def _log_tail(path: Path) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return lines[-LOG_TAIL_LINES:]


def _error_lines(path: Path) -> list[str]:
    """Lines of a node's JSON log at level error or critical, and tracebacks."""
    found: list[str] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return found
    for line in text.splitlines():
        if "Traceback" in line:
            found.append(line)
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
            found.append(line[:REQUEST_TEXT_MAX])
    return found


def _consistency_checks(data_dir: Path) -> list[str]:
    """The verify job's single-process consistency checks on the stopped quorum: failures only."""
    from raftmeta.jobs.consistency import facts_to_checks, local_facts

    return [f"{c.name}: {c.detail}" for c in facts_to_checks(local_facts(str(data_dir))) if not c.passed]


__all__ = ["ControllerFuzzConfig", "ControllerFuzzer", "request_text"]
