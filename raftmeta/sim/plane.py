"""The whole metadata plane under simulation: every node a :class:`QuorumController` (the consensus
core, the controller and the request lifecycle the real node runs), a simulated broker fleet and
simulated clients, under the same seeded faults as :class:`~raftmeta.sim.cluster.Simulation`.

- **Brokers** register (RegisterBroker) and heartbeat (BrokerHeartbeat) through any node they can
  reach; a node that is not the controller answers NOT_CONTROLLER and the broker tries the leader
  it names, or another node; an answer that does not come back in time is retried elsewhere.
- **Clients** create topics (CreateTopics with a request id, retried with the same id until an
  answer comes) and read them (DescribeTopics, linearizable by default).

Checked, besides every consensus invariant of the base simulation:

- invariant 7 on every partition state: every node's controller replays every committed batch,
  and replay refuses a state that breaks it (``7-partition-states``);
- invariant 6 from the clients' history: every acknowledged create is in every running voter's
  committed image at the end, every refused one in none; a retry gets the first answer;
- invariant 9, linearizable reads: a read reflects every create acknowledged before it was
  invoked, and never shows a create that was refused;
- liveness after the faults heal: a create acknowledged on every running voter, every client
  request answered, every broker unfenced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.message import Message

from placement import JavaRandom
from raftmeta.controller import Controller, ControllerConfig
from raftmeta.controller.errors import ControllerFailedError, NotControllerError, ReplayError
from raftmeta.controller.quorum import QuorumController, QuorumControllerConfig
from raftmeta.raft import CommittedTruncationError, Entry, Envelope, Faults, RaftCore, Ready, Role, SnapshotImage
from raftmeta.records.codec import iter_batches
from raftmeta.records.decode import decode_records
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.cluster import CUSTOM, PROPOSE, RunResult, SimNode, Simulation
from raftmeta.sim.params import SimParams
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

T = TypeVar("T")
BROKERS = 5
CLIENTS = 5
# Broker sessions outlast the longest fault (a paused node or partition: 4 s) plus an election,
# so a broker that keeps heartbeating through another node is not fenced by it.
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 400
# A request whose answer has not come back by then is sent again (same request id) elsewhere.
ATTEMPT_TIMEOUT_MS = 500
RETRY_BACKOFF_MS = 20
# After the liveness check: how long the clients stay quiet for every voter to apply the last commits.
QUIET_BUDGET_MS = 20_000


@dataclass(slots=True)
class Call:
    """One request a client or broker is waiting on, through all its attempts."""

    owner: str  # "client-N" or "broker-N"
    method: str
    request: Message
    invoked_ms: int
    topic: str = ""
    key: int = -1  # the current attempt's key; answers to older attempts are ignored
    retry_at_ms: int = 0
    leader_hint: int = -1
    attempts: int = 0


@dataclass(slots=True)
class Broker:
    broker_id: int
    epoch: int = -1
    heartbeat_at_ms: int = 0


@dataclass(slots=True)
class History:
    acknowledged: dict[str, int] = field(default_factory=dict)  # topic -> when its create was answered
    refused: set[str] = field(default_factory=set)
    reads: list[tuple[int, set[str]]] = field(default_factory=list)  # (invoked, topics seen)


class PlaneSimulation(Simulation):
    def __init__(
        self,
        params: SimParams,
        *,
        core_faults: Faults | None = None,
        ack_before_commit: bool = False,
        trace: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(params, core_faults=core_faults, trace=trace)
        # Planted bug: the controller answers a write when it proposes it, not when it commits.
        self.ack_before_commit = ack_before_commit
        self.qcs: dict[int, QuorumController] = {}
        self.calls: dict[str, Call] = {}  # owner -> its outstanding call
        self.by_key: dict[int, Call] = {}
        self.brokers = [Broker(b) for b in range(BROKERS)]
        self.history = History()
        self._next_key = 1
        self._next_topic = 0
        self._next_topic_id = 1
        self.heal_at = -1
        # owner -> the node that answered it last: clients keep talking to the controller they
        # know (as a real client caches it) until it says NOT_CONTROLLER or stops answering.
        self.known_controller: dict[str, int] = {}
        self.quiet = False  # after convergence: no new client work, let every voter catch up

    # -- the nodes --------------------------------------------------------------------------------
    def _topic_id(self) -> bytes:
        # Unique across every leader of the run (a real node draws uuid4s), and deterministic.
        value = self._next_topic_id
        self._next_topic_id += 1
        return value.to_bytes(16, "big")

    def _make_controller(self, records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
        config = ControllerConfig(session_timeout_ms=SESSION_TIMEOUT_MS)
        controller = (
            Controller.from_snapshot(records, offset, config=config)
            if records
            else Controller(config=config, committed_offset=offset)
        )
        controller.ids = self._topic_id
        controller.random = JavaRandom(self.rng.next_int(1 << 30))
        return controller

    def _on_start(self, node: SimNode) -> None:
        assert node.core is not None
        snapshot = node.disk.snapshot
        records = _records(snapshot.data) if snapshot is not None else []
        start = snapshot.end_offset if snapshot is not None else 0
        self.qcs[node.node_id] = QuorumController(
            node.core,
            self._replay(node.node_id, lambda: self._make_controller(records, start - 1)),
            self._make_controller,
            # The simulator takes the snapshots (the base simulation's policy).
            config=QuorumControllerConfig(
                snapshot_interval_records=1 << 40, unsafe_ack_before_commit=self.ack_before_commit
            ),
        )

    def _poll(self, node: SimNode, core: RaftCore) -> int:
        return self.qcs[node.node_id].poll(self.now)

    def _take_ready(self, node: SimNode, core: RaftCore) -> Ready:
        return self.qcs[node.node_id].take_ready()

    def _step(self, node: SimNode, core: RaftCore, envelope: Envelope) -> None:
        self.qcs[node.node_id].step(self.now, envelope)

    def _on_install(self, node: SimNode, image: SnapshotImage) -> None:
        qc = self.qcs[node.node_id]
        records = _records(image.data)
        self._replay(node.node_id, lambda: qc.install_snapshot(records, image.end_offset))

    def _apply(self, node: SimNode, core: RaftCore, entries: list[Entry]) -> None:
        super()._apply(node, core, entries)
        qc = self.qcs[node.node_id]
        self._replay(node.node_id, lambda: qc.apply_committed(self.now, entries))

    def _checked(self, check: str, times: int = 1) -> None:
        checks = self.checker.checks
        checks[check] = checks.get(check, 0) + times

    def _replay(self, node_id: int, replay: Callable[[], T]) -> T:
        """Replay refuses a partition state that breaks invariant 7 (and any record that cannot
        follow the image): that is a violation, not a crash of the simulator."""
        self._checked("7-partition-states")
        try:
            return replay()
        except ReplayError as error:
            raise InvariantViolation("7-partition-states", f"node {node_id}: {error}") from None

    def _drive(self, node: SimNode) -> None:
        super()._drive(node)
        if node.core is not None:
            self._collect(self.qcs[node.node_id])

    # -- answers ----------------------------------------------------------------------------------
    def _collect(self, qc: QuorumController) -> None:
        qc.take_events()
        qc.take_snapshot_due()
        for answer in qc.take_answers():
            call = self.by_key.pop(answer.key, None)
            if call is None or call.key != answer.key:
                continue  # an older attempt's answer: its retry carries the same request id
            if isinstance(answer.error, NotControllerError):
                self.known_controller.pop(call.owner, None)
                call.leader_hint = answer.error.leader_id
                call.retry_at_ms = self.now + RETRY_BACKOFF_MS
                call.key = -1
                continue
            if isinstance(answer.error, ControllerFailedError):
                raise InvariantViolation("controller-failed", f"{call.method}: {answer.error}")
            if answer.error is not None:
                raise InvariantViolation("request-refused", f"{call.method} refused as malformed: {answer.error}")
            assert answer.response is not None
            self.known_controller[call.owner] = qc.core.node_id
            self._answered(call, answer.response)

    def _answered(self, call: Call, response: Message) -> None:
        del self.calls[call.owner]
        history = self.history
        if isinstance(response, controller_pb2.CreateTopicsResponse):
            [result] = response.topics
            if result.error_code == errors_pb2.NONE:
                history.acknowledged.setdefault(call.topic, self.now)
                self.result.acknowledged += 1
            else:
                history.refused.add(call.topic)
            self._trace(f"{call.owner} create {call.topic}: {errors_pb2.ErrorCode.Name(result.error_code)}")
        elif isinstance(response, controller_pb2.DescribeTopicsResponse):
            seen = {t.name for t in response.topics if t.error_code == errors_pb2.NONE}
            self._checked("9-linearizable-reads")
            missing = sorted(t for t, at in history.acknowledged.items() if at < call.invoked_ms and t not in seen)
            if missing:
                raise InvariantViolation(
                    "9-linearizable-reads",
                    f"{call.owner}'s read invoked at {call.invoked_ms} misses {missing[:3]}, acknowledged before it",
                )
            history.reads.append((call.invoked_ms, seen))
        elif isinstance(response, controller_pb2.RegisterBrokerResponse):
            broker = self.brokers[int(call.owner.split("-")[1])]
            if response.error_code == errors_pb2.NONE:
                broker.epoch = response.broker_epoch
                broker.heartbeat_at_ms = self.now
        elif isinstance(response, controller_pb2.BrokerHeartbeatResponse):
            broker = self.brokers[int(call.owner.split("-")[1])]
            if response.error_code in (errors_pb2.STALE_BROKER_EPOCH, errors_pb2.BROKER_ID_NOT_REGISTERED):
                broker.epoch = -1  # registered again by another incarnation's record: re-register
            broker.heartbeat_at_ms = self.now + HEARTBEAT_INTERVAL_MS

    # -- clients and brokers ----------------------------------------------------------------------
    def _propose(self) -> None:
        rng = self.rng
        now = self.now
        for broker in self.brokers:
            owner = f"broker-{broker.broker_id}"
            if owner in self.calls:
                continue
            if broker.epoch < 0:
                request: Message = controller_pb2.RegisterBrokerRequest(
                    broker_id=broker.broker_id,
                    incarnation_id=bytes([0xB0, broker.broker_id]) + bytes(14),
                    rack=f"r{broker.broker_id % 3}",
                )
                self.calls[owner] = Call(owner, "RegisterBroker", request, now)
            elif now >= broker.heartbeat_at_ms:
                heartbeat = controller_pb2.BrokerHeartbeatRequest(broker_id=broker.broker_id, broker_epoch=broker.epoch)
                self.calls[owner] = Call(owner, "BrokerHeartbeat", heartbeat, now)
        for client in range(CLIENTS):
            owner = f"client-{client}"
            if owner in self.calls or self.quiet or rng.random() < 0.5:
                continue
            if rng.random() < 0.7:
                self._next_topic += 1
                name = f"t{self._next_topic}"
                topic = controller_pb2.CreatableTopic(
                    name=name, num_partitions=1 + rng.next_int(3), replication_factor=1 + rng.next_int(3)
                )
                create = controller_pb2.CreateTopicsRequest(topics=[topic], request_id=f"{owner}-{name}")
                self.calls[owner] = Call(owner, "CreateTopics", create, now, topic=name)
            else:
                self.calls[owner] = Call(owner, "DescribeTopics", controller_pb2.DescribeTopicsRequest(), now)
        for call in list(self.calls.values()):
            if self.calls.get(call.owner) is not call:
                continue  # answered meanwhile (sending one call drives a node, which may answer others)
            if call.key < 0 and now >= call.retry_at_ms:
                self._send_call(call)
            elif call.key >= 0 and now >= call.retry_at_ms:
                self.by_key.pop(call.key, None)  # timed out: the same request again, elsewhere
                self.known_controller.pop(call.owner, None)
                call.key = -1
                self._send_call(call)
        interval = self.params.proposal_interval_ms if not self.healed else max(self.params.proposal_interval_ms, 100)
        self._push(now + 1 + rng.next_int(2 * interval), PROPOSE, None)

    def _send_call(self, call: Call) -> None:
        # A paused node is reachable: the request waits in its inbox and is handled when it
        # resumes -- possibly before the node notices it lost its leadership meanwhile.
        up = [n for n in self.nodes.values() if n.core is not None and not n.persisting]
        if not up:
            call.retry_at_ms = self.now + RETRY_BACKOFF_MS
            return
        hint = call.leader_hint if call.leader_hint >= 0 else self.known_controller.get(call.owner, -1)
        hinted = [n for n in up if n.node_id == hint]
        node = hinted[0] if hinted else up[self.rng.next_int(len(up))]
        call.leader_hint = -1
        call.attempts += 1
        call.retry_at_ms = self.now + ATTEMPT_TIMEOUT_MS
        if self.params.drop_rate and self.rng.random() < self.params.drop_rate:
            call.key = self._next_key  # lost on the way: no answer, a retry after the timeout
            self._next_key += 1
            return
        call.key = self._next_key
        self._next_key += 1
        self.by_key[call.key] = call
        if node.paused_until > self.now:
            self._push(node.paused_until, CUSTOM, (node.node_id, node.incarnation, call.key))
            return
        self._submit(node, call)

    def _custom(self, payload: tuple[int, int, int]) -> None:
        """A request that reached a paused node is handled now that it resumed (unless it crashed)."""
        node_id, incarnation, key = payload
        node = self.nodes[node_id]
        call = self.by_key.get(key)
        if call is None or node.core is None or node.incarnation != incarnation:
            return
        if node.blocked(self.now):
            self._push(max(self.now + 1, node.paused_until), CUSTOM, payload)
            return
        self._submit(node, call)

    def _submit(self, node: SimNode, call: Call) -> None:
        self.qcs[node.node_id].submit(self.now, call.key, call.method, call.request)
        self._drive(node)

    # -- the end of the run -----------------------------------------------------------------------
    def _heal_all(self) -> None:
        super()._heal_all()
        self.heal_at = self.now

    def _converged(self) -> bool:
        """A create acknowledged after the heal is on every running voter, every call made before
        the heal is answered, and every broker is registered and unfenced on the leader."""
        history = self.history
        probes = [t for t, at in history.acknowledged.items() if at >= self.heal_at >= 0]
        if not probes:
            return False
        voters = [self.qcs[n.node_id] for n in self.nodes.values() if n.core is not None and n.node_id in self.voters]
        if not all(probes[0] in qc.controller.committed_image.topic_ids for qc in voters):
            return False
        if any(call.invoked_ms < self.heal_at for call in self.calls.values()):
            return False
        leaders = [qc for qc in voters if qc.core.role is Role.LEADER and qc.active]
        if not leaders:
            return False
        image = leaders[0].controller.committed_image
        return all(b.broker_id in image.brokers and not image.brokers[b.broker_id].fenced for b in self.brokers)

    def _check_plane(self) -> None:
        history = self.history
        for node in self.nodes.values():
            if node.core is None or node.node_id not in self.voters:
                continue
            topics = self.qcs[node.node_id].controller.committed_image.topic_ids
            self._checked("6-client-history", len(history.acknowledged) + len(history.refused))
            lost = sorted(set(history.acknowledged) - set(topics))
            if lost:
                raise InvariantViolation("6-acknowledged-creates", f"node {node.node_id} lacks acknowledged {lost[:3]}")
            phantom = sorted(history.refused & set(topics))
            if phantom:
                raise InvariantViolation("6-refused-creates", f"node {node.node_id} has refused {phantom[:3]}")
        for invoked, seen in history.reads:
            shown = sorted(seen & history.refused)
            if shown:
                raise InvariantViolation(
                    "9-linearizable-reads", f"a read invoked at {invoked} shows refused {shown[:3]}"
                )

    def _caught_up(self) -> bool:
        """Every client call answered and every running voter has applied the leader's commits."""
        if any(call.owner.startswith("client") for call in self.calls.values()):
            return False
        running = [n for n in self.nodes.values() if n.core is not None and n.node_id in self.voters]
        leaders = [n for n in running if n.core is not None and n.core.role is Role.LEADER]
        if len(leaders) != 1:
            return False
        end = leaders[0].applied_offset
        return all(n.applied_offset == end for n in running)

    def run(self, steps: int) -> RunResult:
        result = super().run(steps)
        if result.violation is None:
            try:
                self.quiet = True
                self._loop(200_000, until_ms=self.now + QUIET_BUDGET_MS, stop=self._caught_up)
                if not self._caught_up():
                    raise InvariantViolation(
                        "liveness", f"the voters did not catch up within {QUIET_BUDGET_MS} ms of quiet after healing"
                    )
                self._check_plane()
            except InvariantViolation as violation:
                result.violation = violation
            except (CommittedTruncationError, AssertionError) as error:
                result.violation = InvariantViolation(type(error).__name__, str(error) or repr(error))
        return result


def _records(data: bytes) -> list[records_pb2.MetadataRecord]:
    """The records of a simulated snapshot (the committed batches below its end, concatenated)."""
    return [record for batch in iter_batches(data) for record in decode_records(batch.data)]
