"""The whole metadata plane under simulation: every node a :class:`QuorumController` (the consensus
core, the controller and the request lifecycle the real node runs), a simulated broker fleet and
simulated clients, under the same seeded faults as :class:`~raftmeta.sim.cluster.Simulation`.

- **Brokers** register (RegisterBroker) and heartbeat (BrokerHeartbeat) through any node they can
  reach; a node that is not the controller answers NOT_CONTROLLER and the broker tries the leader
  it names, or another node; an answer that does not come back in time is retried elsewhere.
- **Brokers fail and recover** (before the heal): a failed broker stops heartbeating, is fenced
  after its session, and leaves its ISRs; recovered, it heartbeats again and is unfenced.
- **Partition leaders** (:mod:`raftmeta.local.partition_leader`) read a node's committed image (a stale
  read, as a broker's metadata cache lags) and send AlterPartition: a follower whose broker has
  been up for ``CATCH_UP_MS`` joins the ISR, one down for longer than ``REPLICA_LAG_TIME_MAX_MS``
  leaves it. The controller elects preferred leaders every ``LEADER_IMBALANCE_CHECK_MS``.
- **Clients** create topics (CreateTopics with a request id, retried with the same id until an
  answer comes) and read them (DescribeTopics, linearizable by default). Some of their work
  contends on a few names (:data:`CONTENDED`): creates, deletes, partition additions and reads of
  one name, so the same topic is made, grown and removed under concurrent clients. Now and then a
  client reuses the request id of a write answered OK for a different request, which must be
  refused (``request-id-reuse-refused``).

Checked, besides every consensus invariant of the base simulation:

- invariant 7 on every partition state: every node's controller replays every committed batch,
  and replay refuses a state that breaks it (``7-partition-states``);
- invariant 6 from the clients' history: every acknowledged create of a fresh name is in every
  running voter's committed image at the end, every refused one in none; a retry gets the first
  answer;
- invariant 9, linearizable reads: a read reflects every create of a fresh name acknowledged
  before it was invoked, and never shows a create that was refused;
- invariant 10, the whole client history is linearizable (:mod:`raftmeta.lincheck`, recorded by
  :mod:`raftmeta.sim.client_history`): checked at the end of every run, also one that already
  failed (then the history up to the failure), so a failure carries its timeline;
- liveness after the faults heal (L1, L2): a create acknowledged on every running voter, every
  client request answered, every broker unfenced, every partition's ISR its full replica set, and
  every partition led by its preferred replica.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from google.protobuf.message import Message

from placement import JavaRandom
from raftmeta.controller import Controller, ControllerConfig
from raftmeta.controller.errors import ControllerFailedError, NotControllerError, ReplayError, RequestError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.quorum import QuorumController, QuorumControllerConfig, SnapshotDue
from raftmeta.controller.snapshot import SnapshotEncoder
from raftmeta.local.partition_leader import BrokerLiveness, PartitionState, alter_partition_requests, isr_changes
from raftmeta.raft import CommittedTruncationError, Entry, Envelope, Faults, RaftCore, Ready, Role, SnapshotImage
from raftmeta.records.codec import iter_batches
from raftmeta.records.decode import decode_records
from raftmeta.records.snapshot_batches import snapshot_batches
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.client_history import ClientHistory, HistoryFailure
from raftmeta.sim.cluster import CUSTOM, PROPOSE, REQUEST_TYPES, RunResult, SimNode, Simulation
from raftmeta.sim.oracle import RuleOracle
from raftmeta.sim.params import SimParams
from raftmeta.sim.plane_health import HealthWatch, unhealthy_partitions
from raftmeta.sim.rng import SeededRandom
from raftmeta.sim.rule_bugs import RULE_BUGS, planted
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
# Clients with odd ids wait as long as the real client does (RetryPolicy.attempt_timeout_s, 5 s):
# long enough to see the answer of a node that was paused when it got the request.
PATIENT_ATTEMPT_TIMEOUT_MS = 5_000
RETRY_BACKOFF_MS = 20
# After the liveness check: how long the clients stay quiet for every voter to apply the last commits.
QUIET_BUDGET_MS = 20_000
# Partition leaders: a follower is in sync after this long up, out of sync after this long down
# (shorter than the session, so the leaders' shrink is exercised, not only the controller's fence).
CATCH_UP_MS = 1_000
REPLICA_LAG_TIME_MAX_MS = 2_000
ISR_CHECK_INTERVAL_MS = 500
# The node driver's controller timer (ServerConfig.tick_interval_ms): broker sessions, rebalancing.
CONTROLLER_TICK_MS = 250
LEADER_IMBALANCE_CHECK_MS = 2_000
# A turn of work over the image (ControllerConfig), small enough that a broker leaving or
# returning takes several turns here. The passes the controller's timer makes keep the default
# bound: they go on one tick (250 ms) at a time, and at 8 partitions a tick a run with ~2,000
# partitions needed longer than the liveness budget to rebalance (seed 5013).
SCAN_PARTITIONS_PER_TURN = 8
PARTITION_CHANGES_PER_BATCH = 3
# ... on a small image. On a bigger one the budget grows so that one pass takes about this many
# turns: every turn with records waits for its commit (two Fetch rounds at up to 60 ms a message),
# and at 8 partitions and 3 changes a turn, a run with 883 partitions whose five brokers had all
# restarted needed ~1,200 commits to fence and unfence them after the heal, twice the liveness
# budget (seed 100023). Up to 128 partitions the budget is the fixed one above.
TURNS_PER_PASS = 16
# Per proposal tick before the heal: the chance that a broker fails; it stays down for up to
# BROKER_DOWN_MAX_MS (often past the session timeout, so it is fenced and its leaderships move).
BROKER_FAIL_RATE = 0.003
BROKER_DOWN_MAX_MS = 12_000
# Names the clients contend on (created, grown, deleted and read again and again), beside the
# fresh ``t<n>`` names each create of the main mix takes. Only the linearizability check
# (invariant 10) judges them: rules 6 and 9 assume topics are never deleted.
CONTENDED = ("c0", "c1", "c2")
CONTENDED_SHARE = 0.25  # of the clients' operations
# What the controller's rules are about, drawn from a random stream of their own (``workload``):
# a recovering broker is half the time a restarted process, which registers again with a new
# incarnation and whose previous incarnation's last heartbeat (the old epoch) arrives after that;
# a broker is cut off from the controllers (no heartbeats, so it is fenced) while it still fetches
# (its partition leaders ask for it back in their ISRs); a client sends new work under the request
# id of its last write (refused); every fourth fresh topic enables unclean leader election.
RESTART_SHARE = 0.5
BROKER_CUT_OFF_RATE = 0.004
REUSE_SHARE = 0.1  # of the contended operations
UNCLEAN_EVERY = 4
UNCLEAN = "unclean.leader.election.enable"
# Records per committed batch, roughly, in the plane's mix (heartbeats, creates, ISR changes): the
# snapshot interval in records that matches a seed's snapshot_every_batches.
SNAPSHOT_RECORDS_PER_BATCH = 4


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
    sent_ms: int = -1  # when the current attempt was sent
    reused_id: bool = False  # new work under an answered request id: must be refused


@dataclass(slots=True)
class Broker:
    broker_id: int
    epoch: int = -1
    heartbeat_at_ms: int = 0
    failed: bool = False
    recover_at_ms: int = 0
    # As partition leaders see it: up = heartbeating and unfenced (see raftmeta.local.partition_leader).
    up_since_ms: int | None = None
    down_since_ms: int | None = None
    incarnation: int = 0  # restarts so far (a new incarnation id each)
    stale_epoch: int = -1  # the previous incarnation's epoch, until its late heartbeat is sent
    cut_off_until_ms: int = -1  # cut off from the controllers (still fetching) until then

    def liveness(self) -> BrokerLiveness:
        return BrokerLiveness(self.epoch, self.up_since_ms, self.down_since_ms)

    def went_down(self, now_ms: int) -> None:
        if self.up_since_ms is not None:
            self.up_since_ms = None
            self.down_since_ms = now_ms


@dataclass(frozen=True, slots=True)
class LeaderProbe:
    """A node's probe of its leader after a call to it failed (raftmeta/server/probe.py): its
    connect is answered one network latency later, refused if the leader's process is down."""

    node_id: int
    incarnation: int
    leader_id: int
    epoch: int


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
        plane_bugs: frozenset[str] = frozenset(),
        driver_bugs: frozenset[str] = frozenset(),
        trace: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(params, core_faults=core_faults, driver_bugs=driver_bugs, trace=trace)
        # Planted bugs (raftmeta.sim.runner.PLANE_BUGS), each breaking one rule the checks must see.
        self.ack_before_commit = "ack_before_commit" in plane_bugs
        self.no_isr_expansion = "no_isr_expansion" in plane_bugs
        self.no_auto_rebalance = "no_auto_rebalance" in plane_bugs
        self.stale_broker_sessions = "stale_broker_sessions" in plane_bugs
        self.stale_partition_epoch = "stale_partition_epoch" in plane_bugs
        self.rule_bugs = frozenset(plane_bugs & set(RULE_BUGS))  # planted for the length of run()
        self.qcs: dict[int, QuorumController] = {}
        self.snapshot_encoders: dict[int, SnapshotEncoder] = {}
        # The controller's rules, checked on every committed record and answer (raftmeta.sim.oracle).
        self.oracle = RuleOracle()
        self.calls: dict[str, Call] = {}  # owner -> its outstanding call
        self.by_key: dict[int, Call] = {}
        self.brokers = [Broker(b) for b in range(BROKERS)]
        self.history = History()
        self.client_history = ClientHistory()
        self._next_key = 1
        self._next_request = 0  # request ids of the contended operations
        self._next_topic = 0
        self._next_topic_id = 1
        self.workload = SeededRandom(f"{params.seed}-workload")
        self.recorded_ids: dict[str, tuple[str, str]] = {}  # client -> (method, id) of its last answered write
        self.heal_at = -1
        # The first fresh create acknowledged at or after the heal: L1 waits for it on every voter.
        self.heal_probe: str | None = None
        self.health = HealthWatch()  # the partitions' health, judged again only where a commit changed it
        # owner -> the node that answered it last: clients keep talking to the controller they
        # know (as a real client caches it) until it says NOT_CONTROLLER or stops answering.
        self.known_controller: dict[str, int] = {}
        self.quiet = False  # after convergence: no new client work, let every voter catch up
        self.isr_check_at = 0
        self.controller_tick_at = 0
        # For the broker-sessions check: (node, epoch) -> when its controller became active;
        # (node, epoch, broker) -> when the heartbeats it answered OK were sent, in order.
        self.activated_ms: dict[tuple[int, int], int] = {}
        self.heartbeat_sent_ms: dict[tuple[int, int, int], list[int]] = {}
        # (topic id, partition, broker) -> when the partition leaders first saw that replica.
        self.replica_seen_ms: dict[tuple[bytes, int, int], int] = {}
        # (prober, leader) of the leader probes under way (the node probes a peer once at a time),
        # and the correlation ids of the EndQuorumEpoch stepped for a dead leader (no one waits).
        self.probing: set[tuple[int, int]] = set()
        self._next_probe_correlation = -1

    # -- the nodes --------------------------------------------------------------------------------
    def _topic_id(self) -> bytes:
        # Unique across every leader of the run (a real node draws uuid4s), and deterministic.
        value = self._next_topic_id
        self._next_topic_id += 1
        return value.to_bytes(16, "big")

    def _make_controller(self, records: Sequence[records_pb2.MetadataRecord], offset: int) -> Controller:
        config = ControllerConfig(
            session_timeout_ms=SESSION_TIMEOUT_MS,
            leader_imbalance_check_interval_ms=LEADER_IMBALANCE_CHECK_MS,
            auto_leader_rebalance_enable=not self.no_auto_rebalance,
            # Turns small enough that a broker leaving or returning takes several of them here,
            # with requests held behind it and leadership changing midway.
            scan_partitions_per_turn_max=SCAN_PARTITIONS_PER_TURN,
            partition_changes_per_batch_max=PARTITION_CHANGES_PER_BATCH,
        )
        controller = (
            Controller.from_snapshot(records, offset, config=config)
            if records
            else Controller(config=config, committed_offset=offset)
        )
        if self.stale_broker_sessions:
            # Planted bug: a node elected again keeps the heartbeat times of its earlier leadership.
            activate = controller.activate

            def activate_keeping_sessions() -> None:
                kept = dict(controller.last_contact_ms)
                activate()
                controller.last_contact_ms.update(kept)

            controller.activate = activate_keeping_sessions  # type: ignore[method-assign]
        if self.stale_partition_epoch:
            # Planted bug: a partition change (AlterPartition, elections, reassignments) is written
            # without a new partition epoch -- after the leader's controller applied the right one.
            handle = controller.handle

            def handle_keeping_epochs(method: str, request: Message, now_ms: int) -> Any:
                handled = handle(method, request, now_ms)
                for record in handled.records:
                    if record.WhichOneof("record") == "partition_change":
                        record.partition_change.partition_epoch -= 1
                return handled

            controller.handle = handle_keeping_epochs  # type: ignore[method-assign,assignment]
        controller.ids = self._topic_id
        controller.random = JavaRandom(self.rng.next_int(1 << 30))
        self.oracle.watch(controller)  # last: it sees what the controller (and any planted bug) does
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
            # Snapshots as the node takes them: when the QuorumController's policy says, encoded
            # by the node's encoder (_write_snapshot).
            config=QuorumControllerConfig(
                snapshot_interval_records=_snapshot_interval_records(self.params),
                unsafe_ack_before_commit=self.ack_before_commit,
            ),
        )
        # One encoder per process, as the node's SnapshotWriter: it re-encodes only topics changed
        # since the last snapshot.
        self.snapshot_encoders[node.node_id] = SnapshotEncoder()

    # -- the leader-loss path (the node's: raftmeta/server/probe.py) ---------------------------------
    def _crash(self, node: SimNode, *, after_vote: bool = False) -> None:
        super()._crash(node, after_vote=after_vote)
        # Its connections reset: every node following it has its Fetch stream open to it (one is
        # always parked there or on its way), and that call fails now -- unless a partition
        # stands between them, which drops packets rather than resetting connections.
        for other in self.nodes.values():
            if other.core is not None and (other.node_id, node.node_id) not in self.blocked:
                self._call_failed(other, node.node_id)

    def _refused(self, envelope: Envelope) -> None:
        # A response is no call of the sender's: only a failed request reports the peer.
        sender = self.nodes[envelope.source]
        if isinstance(envelope.message, REQUEST_TYPES) and sender.core is not None:
            self._call_failed(sender, envelope.destination)

    def _call_failed(self, node: SimNode, peer: int) -> None:
        """A call of ``node`` to ``peer`` failed: probe ``peer`` if it is the leader ``node``
        follows (the QuorumController's rule, as the node's LeaderProbe asks it)."""
        epoch = self.qcs[node.node_id].leader_to_probe(peer)
        if epoch is None or (node.node_id, peer) in self.probing:
            return
        self.probing.add((node.node_id, peer))
        probe = LeaderProbe(node.node_id, node.incarnation, peer, epoch)
        self._push(self.now + self.params.latency_min_ms, CUSTOM, probe)

    def _probe_answered(self, probe: LeaderProbe) -> None:
        """The probe's connect is answered: refused while the leader's process is down (proof it is
        gone: ``QuorumController.leader_gone``, as the node's LeaderGone input); accepted by a
        restarted process, or lost in a partition, it proves nothing and the fetch timeout judges."""
        node = self.nodes[probe.node_id]
        if node.core is None or node.incarnation != probe.incarnation:
            self.probing.discard((probe.node_id, probe.leader_id))
            return  # the prober crashed: its probe task went with it
        if node.blocked(self.now):
            # The probe task runs when the node does; its result waits in the inbox meanwhile.
            self._push(max(self.now + 1, node.paused_until), CUSTOM, probe)
            return
        self.probing.discard((probe.node_id, probe.leader_id))
        if self.nodes[probe.leader_id].core is not None or (probe.node_id, probe.leader_id) in self.blocked:
            return
        correlation_id = self._next_probe_correlation
        self._next_probe_correlation -= 1
        qc = self.qcs[node.node_id]
        if qc.leader_gone(node.clock(self.now), probe.leader_id, probe.epoch, correlation_id):
            self._trace(f"n{node.node_id} probed leader n{probe.leader_id}: refused, electing a successor now")
            self._drive(node)

    def _take_snapshot(self, node: SimNode, core: RaftCore) -> None:
        """Not the base simulation's policy: the QuorumController's (see _write_snapshot)."""

    def _snapshot_committed(self, node: SimNode, image: SnapshotImage) -> list[bytes]:
        """The plane's snapshots hold the image's records, not the log's batches: replay checks
        them (invariant 7) as the node loads them, and the end of the run checks the images."""
        return []

    def _write_snapshot(self, qc: QuorumController, due: SnapshotDue) -> None:
        """Take the snapshot the QuorumController's policy asks for, as the node's SnapshotWriter
        does (at once here: the simulated disk has no snapshot thread): the node's encoder, the
        snapshot batches the node's storage writes, then ``on_snapshot_created``."""
        node = self.nodes[qc.core.node_id]
        now = node.clock(self.now)
        records = self.snapshot_encoders[node.node_id].stream(due.image, due.created)
        data = b"".join(
            snapshot_batches(
                due.epoch, records, last_contained_log_timestamp_ms=now, append_timestamp_ms=now, voters=due.voters
            )
        )
        count = sum(b.header.record_count for b in iter_batches(data) if not b.header.is_control)
        image = SnapshotImage(due.end_offset, due.epoch, data)
        qc.on_snapshot_created(now, image, count)
        node.disk.trim(image, qc.core.log.start_offset)
        self.result.snapshots_taken += 1
        self._trace(f"n{node.node_id} snapshot end={due.end_offset} records={count}")

    def _poll(self, node: SimNode, core: RaftCore) -> int:
        return self.qcs[node.node_id].poll(node.clock(self.now))

    def _take_ready(self, node: SimNode, core: RaftCore) -> Ready:
        return self.qcs[node.node_id].take_ready()

    def _waiting(self, node: SimNode) -> int:
        # As the node driver: the requests waiting for a commit answer decide "answer first".
        return self.qcs[node.node_id].waiting_count

    def _deadline_after(self, node: SimNode, deadline: int) -> int:
        # As the node driver: the open batch's linger, or the next turn of controller work.
        return self.qcs[node.node_id].deadline(deadline)

    def _step(self, node: SimNode, core: RaftCore, envelope: Envelope) -> None:
        self.qcs[node.node_id].step(node.clock(self.now), envelope)

    def _on_install(self, node: SimNode, image: SnapshotImage) -> None:
        qc = self.qcs[node.node_id]
        records = _records(image.data)
        self._replay(node.node_id, lambda: qc.install_snapshot(records, image.end_offset))

    def _apply(self, node: SimNode, core: RaftCore, entries: list[Entry]) -> None:
        super()._apply(node, core, entries)
        qc = self.qcs[node.node_id]
        # The oracle judges each committed record once, before any node's replay (which refuses
        # some of the same breaks on its own), then the image of the node that applied it first.
        fresh = self.oracle.consume(entries)
        self._replay(node.node_id, lambda: qc.apply_committed(node.clock(self.now), entries))
        if fresh:
            self.oracle.compare(node.node_id, qc.controller.committed_image, node.applied_offset - 1)

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
        node_id = qc.core.node_id
        for message, fields in qc.take_events():
            if message == "controller active":
                self.activated_ms[(node_id, fields["epoch"])] = self.now
            elif message == "leader process gone; electing a successor now":
                self._checked("leader-gone")  # the node's leader-loss path was taken
            elif message in ("broker fenced", "broker unfenced", "controller work finished"):
                # The lifecycle is exercised, not only healthy; brokers leave and return in turns.
                self._checked(message.replace(" ", "-"))
                if message == "broker fenced" and fields.get("cause") == "broker session expired":
                    # Logged when its batch committed, commit_ms after the controller decided it.
                    decided = self.now - fields["commit_ms"]
                    self._check_session_fence(node_id, fields["epoch"], fields["broker_id"], decided)
        due = qc.take_snapshot_due()
        if due is not None:
            self._write_snapshot(qc, due)
        self.oracle.raise_pending()
        for answer in qc.take_answers():
            call = self.by_key.pop(answer.key, None)
            if call is None or call.key != answer.key or self.calls.get(call.owner) is not call:
                # An older attempt's answer (its retry carries the same request id), or one for
                # a broker that failed meanwhile (its process, and so its call, is gone).
                continue
            if isinstance(answer.error, NotControllerError):
                self.known_controller.pop(call.owner, None)
                call.leader_hint = answer.error.leader_id
                call.retry_at_ms = self.now + RETRY_BACKOFF_MS
                call.key = -1
                continue
            if isinstance(answer.error, ControllerFailedError):
                raise InvariantViolation("controller-failed", f"{call.method}: {answer.error}")
            if call.reused_id:
                self._reused_id_answered(call, answer.error, answer.response)
                continue
            if answer.error is not None:
                raise InvariantViolation("request-refused", f"{call.method} refused as malformed: {answer.error}")
            assert answer.response is not None
            self.known_controller[call.owner] = node_id
            response = answer.response
            if (
                isinstance(response, controller_pb2.BrokerHeartbeatResponse)
                and call.owner.startswith("broker-")  # not a late heartbeat of an old incarnation
                and not response.error_code
            ):
                # Answered OK: handled by this node's controller in its current leadership (a
                # leadership lost meanwhile fails its waiting requests), no earlier than sent.
                key = (node_id, qc.core.epoch, call.request.broker_id)  # type: ignore[attr-defined]
                bisect.insort(self.heartbeat_sent_ms.setdefault(key, []), call.sent_ms)
            self._answered(call, answer.response)
            # After the client's history has the answer (a stale read then shows in its timeline).
            self.oracle.answered(node_id, qc.controller, answer.key, call.request, answer.response)

    def _reused_id_answered(self, call: Call, error: Exception | None, response: Message | None) -> None:
        """A request id reused for a different request is refused, naming the id; it took no
        effect, so the client history leaves it out (as any refused request that wrote nothing)."""
        self._checked("request-id-reuse-refused")
        request_id = call.request.request_id  # type: ignore[attr-defined]
        if not isinstance(error, RequestError) or f"request_id {request_id!r} was already used" not in str(error):
            answered = error if error is not None else type(response).__name__
            raise InvariantViolation(
                "request-id-reuse-refused",
                f"{call.owner}'s {call.method} reusing request id {request_id!r} of another request was answered "
                f"{answered}, not refused",
            )
        del self.calls[call.owner]
        self._trace(f"{call.owner} {call.method} reusing {request_id}: refused")

    def _check_session_fence(self, node_id: int, epoch: int, broker_id: int, decided_ms: int) -> None:
        """A broker fenced for a missed session had none of its heartbeats handled by this
        controller for a whole session, counting from the controller's activation (Kafka gives
        every broker a full session then). Sound: a heartbeat is handled no earlier than sent, and
        the controller knows at least the heartbeats this check knows of."""
        self._checked("broker-sessions")
        activated = self.activated_ms.get((node_id, epoch))
        if activated is None or self.nodes[node_id].skewed_until >= activated:
            # Not judged when the controller's clock ran at another rate in this leadership: it
            # measured the session on its own clock, this check on the simulation's.
            return
        # Only heartbeats sent before the decision count (others may be answered before the fence
        # commits and is logged).
        sent = self.heartbeat_sent_ms.get((node_id, epoch, broker_id), [])
        before = bisect.bisect_right(sent, decided_ms)
        since = max(activated, sent[before - 1] if before else -1)
        if decided_ms - since <= SESSION_TIMEOUT_MS:
            raise InvariantViolation(
                "broker-sessions",
                f"node {node_id} (epoch {epoch}) fenced broker {broker_id} at {decided_ms} for a missed session, "
                f"{decided_ms - since} ms after its activation or a heartbeat it answered "
                f"(session {SESSION_TIMEOUT_MS} ms)",
            )

    def _answered(self, call: Call, response: Message) -> None:
        del self.calls[call.owner]
        history = self.history
        if isinstance(response, controller_pb2.CreateTopicsResponse):
            [result] = response.topics
            request = call.request
            assert isinstance(request, controller_pb2.CreateTopicsRequest)
            self.client_history.create_answered(
                call.owner, request.topics[0], call.invoked_ms, self.now, result.error_code
            )
            if result.error_code == errors_pb2.NONE:
                self.recorded_ids[call.owner] = (call.method, request.request_id)
            if call.topic in CONTENDED:
                self._trace(f"{call.owner} create {call.topic}: {errors_pb2.ErrorCode.Name(result.error_code)}")
            elif result.error_code == errors_pb2.NONE:
                if call.topic not in history.acknowledged:
                    history.acknowledged[call.topic] = self.now
                    if self.heal_probe is None and self.heal_at >= 0:
                        self.heal_probe = call.topic
                self.result.acknowledged += 1
            else:
                history.refused.add(call.topic)
            self._trace(f"{call.owner} create {call.topic}: {errors_pb2.ErrorCode.Name(result.error_code)}")
        elif isinstance(response, controller_pb2.DeleteTopicsResponse):
            [deleted] = response.responses
            if deleted.error_code == errors_pb2.NONE:
                self.recorded_ids[call.owner] = (call.method, call.request.request_id)  # type: ignore[attr-defined]
            self.client_history.delete_answered(call.owner, call.topic, call.invoked_ms, self.now, deleted.error_code)
            self._trace(f"{call.owner} delete {call.topic}: {errors_pb2.ErrorCode.Name(deleted.error_code)}")
        elif isinstance(response, controller_pb2.CreatePartitionsResponse):
            [grown] = response.results
            request = call.request
            assert isinstance(request, controller_pb2.CreatePartitionsRequest)
            if grown.error_code == errors_pb2.NONE:
                self.recorded_ids[call.owner] = (call.method, request.request_id)
            self.client_history.partitions_answered(call.owner, request.topics[0], call.invoked_ms, self.now, grown)
            self._trace(f"{call.owner} grow {call.topic}: {errors_pb2.ErrorCode.Name(grown.error_code)}")
        elif isinstance(response, controller_pb2.DescribeTopicsResponse):
            request = call.request
            assert isinstance(request, controller_pb2.DescribeTopicsRequest)
            self.client_history.read_answered(call.owner, request, response, call.invoked_ms, self.now)
            if request.topics:
                return  # a read of a contended name: invariant 10 alone judges it
            seen = {t.name for t in response.topics if t.error_code == errors_pb2.NONE}
            self._checked("9-linearizable-reads")
            # A page covers the names from its cursor up to its next cursor's.
            low = request.cursor.topic_name
            high = response.next_cursor.topic_name if response.HasField("next_cursor") else None
            missing = sorted(
                t
                for t, at in history.acknowledged.items()
                if at < call.invoked_ms and t not in seen and low <= t and (high is None or t < high)
            )
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
                self._late_heartbeat(broker)
        elif isinstance(response, controller_pb2.BrokerHeartbeatResponse) and call.owner.startswith("ghost-"):
            self._checked("stale-heartbeats")
            self._trace(f"{call.owner}'s late heartbeat: {errors_pb2.ErrorCode.Name(response.error_code)}")
        elif isinstance(response, controller_pb2.BrokerHeartbeatResponse):
            broker = self.brokers[int(call.owner.split("-")[1])]
            if response.error_code in (errors_pb2.STALE_BROKER_EPOCH, errors_pb2.BROKER_ID_NOT_REGISTERED):
                broker.epoch = -1  # registered again by another incarnation's record: re-register
            elif response.error_code == errors_pb2.NONE and not broker.failed:
                if response.is_fenced:
                    broker.went_down(self.now)
                elif broker.up_since_ms is None:
                    broker.up_since_ms, broker.down_since_ms = self.now, None
            broker.heartbeat_at_ms = self.now + HEARTBEAT_INTERVAL_MS
        elif isinstance(response, controller_pb2.AlterPartitionResponse):
            self._checked("isr-changes", sum(len(t.partitions) for t in response.topics))
            ineligible = sum(
                p.error_code == errors_pb2.INELIGIBLE_REPLICA for t in response.topics for p in t.partitions
            )
            if ineligible:
                self._checked("isr-additions-refused-ineligible", ineligible)
        elif isinstance(response, (controller_pb2.AddRaftVoterResponse, controller_pb2.RemoveRaftVoterResponse)):
            self._voter_change_answered(call, response)

    # -- voter changes (KIP-853), through the QuorumController as an operator's tool sends them ---
    def _change_voters(self) -> str:
        """An operator asks for one voter change (add a non-voter, or remove a voter), sent to a
        random node like any call, forwarded by NOT_CONTROLLER hints, retried after a timeout."""
        owner = "operator-0"
        if owner in self.calls:
            return "membership_busy"
        rng = self.rng
        voters = self.current_voters()
        outside = [i for i in self.node_ids if i not in voters]
        removable = self._may_remove_voter()
        if not removable and not outside:
            return "membership_kept_two"
        request: Message
        if outside and (rng.random() < 0.5 or len(voters) == 1 or not removable):
            request = controller_pb2.AddRaftVoterRequest(voter_id=rng.choice(outside))
            method, kind = "AddRaftVoter", "membership_add"
        else:
            request = controller_pb2.RemoveRaftVoterRequest(voter_id=rng.choice(list(voters)))
            method, kind = "RemoveRaftVoter", "membership_remove"
        self.calls[owner] = Call(owner, method, request, self.now)
        self.membership_changed = True
        return kind

    def _voter_change_answered(self, call: Call, response: Message) -> None:
        """An acknowledged change is committed: the answering node's latest voter set has the
        change and is committed. (A retry of a change that went through is refused, e.g.
        DUPLICATE_VOTER: the operator sees the first attempt's effect.)"""
        error = getattr(response, "error_code", errors_pb2.NONE)
        self._trace(f"operator {call.method} n{call.request.voter_id}: {errors_pb2.ErrorCode.Name(error)}")  # type: ignore[attr-defined]
        if error != errors_pb2.NONE:
            self.result.faults["membership_refused"] = self.result.faults.get("membership_refused", 0) + 1
            return
        self._checked("voter-changes-acknowledged")
        node = self.nodes[self.known_controller[call.owner]]
        core = node.core
        assert core is not None
        voter = call.request.voter_id  # type: ignore[attr-defined]
        added = call.method == "AddRaftVoter"
        history = core.voter_history
        # The operator makes one change at a time: the one answered is the latest in the log.
        committed = history.at(core.high_watermark)
        if (voter in committed.ids) != added or history.latest_offset() >= core.high_watermark:
            raise InvariantViolation(
                "voter-changes-acknowledged",
                f"{call.method} of {voter} acknowledged by node {node.node_id}, whose committed voters are "
                f"{list(committed.ids)}",
            )

    # -- clients and brokers ----------------------------------------------------------------------
    def _propose(self) -> None:
        rng = self.rng
        now = self.now
        self._broker_faults()
        if now >= self.controller_tick_at:
            self.controller_tick_at = now + CONTROLLER_TICK_MS
            self._tick_controllers()
        if now >= self.isr_check_at:
            self.isr_check_at = now + ISR_CHECK_INTERVAL_MS
            self._partition_leaders()
        for broker in self.brokers:
            owner = f"broker-{broker.broker_id}"
            if owner in self.calls or broker.failed or broker.cut_off_until_ms >= 0:
                continue
            if broker.epoch < 0:
                request: Message = controller_pb2.RegisterBrokerRequest(
                    broker_id=broker.broker_id,
                    incarnation_id=bytes([0xB0, broker.broker_id]) + broker.incarnation.to_bytes(2, "big") + bytes(12),
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
            if rng.random() < CONTENDED_SHARE:
                self.calls[owner] = self._contended_call(owner, now)
            elif rng.random() < 0.7:
                self._next_topic += 1
                name = f"t{self._next_topic}"
                topic = controller_pb2.CreatableTopic(
                    name=name, num_partitions=1 + rng.next_int(3), replication_factor=1 + rng.next_int(3)
                )
                if self._next_topic % UNCLEAN_EVERY == 0:
                    topic.configs[UNCLEAN] = "true"
                create = controller_pb2.CreateTopicsRequest(topics=[topic], request_id=f"{owner}-{name}")
                self.calls[owner] = Call(owner, "CreateTopics", create, now, topic=name)
                self.client_history.create_invoked(name, now)
            else:
                self.calls[owner] = Call(owner, "DescribeTopics", self._read_request(), now)
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

    def _contended_call(self, owner: str, now: int) -> Call:
        """One operation on a contended name: create, delete, grow to a random total, or read it."""
        rng = self.rng
        if owner in self.recorded_ids and self.workload.random() < REUSE_SHARE:
            return self._reused_id_call(owner, now)
        name = CONTENDED[rng.next_int(len(CONTENDED))]
        self._next_request += 1
        request_id = f"{owner}-{self._next_request}"
        roll = rng.next_int(4)
        if roll == 0:
            topic = controller_pb2.CreatableTopic(
                name=name, num_partitions=1 + rng.next_int(3), replication_factor=1 + rng.next_int(3)
            )
            create = controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)
            self.client_history.create_invoked(name, now)
            return Call(owner, "CreateTopics", create, now, topic=name)
        if roll == 1:
            delete = controller_pb2.DeleteTopicsRequest(topic_names=[name], request_id=request_id)
            return Call(owner, "DeleteTopics", delete, now, topic=name)
        if roll == 2:
            grow = controller_pb2.CreatePartitionsTopic(name=name, count=1 + rng.next_int(5))
            request = controller_pb2.CreatePartitionsRequest(topics=[grow], request_id=request_id)
            return Call(owner, "CreatePartitions", request, now, topic=name)
        return Call(owner, "DescribeTopics", controller_pb2.DescribeTopicsRequest(topics=[name]), now, topic=name)

    def _tick_controllers(self) -> None:
        """The node driver's timer: each running node's controller fences brokers whose session
        ran out and elects preferred leaders when due (leader only). A paused node's timer waits."""
        for node in self.nodes.values():
            if node.core is not None and not node.blocked(self.now):
                qc = self.qcs[node.node_id]
                _scale_turns(qc.controller)
                qc.tick(node.clock(self.now))
                self._drive(node)

    def _reused_id_call(self, owner: str, now: int) -> Call:
        """New work (on a name no one else uses) under the id of the client's last answered write,
        of the same method: a client bug the controller must refuse, not answer with the first
        request's outcome."""
        method, request_id = self.recorded_ids.pop(owner)
        self._next_request += 1
        name = f"r{self._next_request}"
        request: Message
        if method == "CreateTopics":
            topic = controller_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            request = controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)
        elif method == "DeleteTopics":
            request = controller_pb2.DeleteTopicsRequest(topic_names=[name], request_id=request_id)
        else:
            grow = controller_pb2.CreatePartitionsTopic(name=name, count=2)
            request = controller_pb2.CreatePartitionsRequest(topics=[grow], request_id=request_id)
        return Call(owner, method, request, now, topic=name, reused_id=True)

    def _late_heartbeat(self, broker: Broker) -> None:
        """A restarted broker registered again: its previous incarnation's last heartbeat, with the
        old epoch, arrives now (must be refused STALE_BROKER_EPOCH by a controller that knows)."""
        if broker.stale_epoch < 0:
            return
        owner = f"ghost-{broker.broker_id}"
        if owner not in self.calls:
            request = controller_pb2.BrokerHeartbeatRequest(broker_id=broker.broker_id, broker_epoch=broker.stale_epoch)
            self.calls[owner] = Call(owner, "BrokerHeartbeat", request, self.now)
        broker.stale_epoch = -1

    def _broker_faults(self) -> None:
        """Before the heal, brokers fail (heartbeats stop) and recover (they resume, or restart and
        register again); a broker is cut off from the controllers for a while (it still fetches)."""
        if self.healed or self.quiet:
            return
        workload = self.workload
        for broker in self.brokers:
            owner = f"broker-{broker.broker_id}"
            if not broker.failed and self.rng.random() < BROKER_FAIL_RATE:
                broker.failed = True
                broker.recover_at_ms = self.now + 500 + self.rng.next_int(BROKER_DOWN_MAX_MS)
                broker.went_down(self.now)
                self.calls.pop(owner, None)
                self._trace(f"broker {broker.broker_id} fails")
            elif broker.failed and self.now >= broker.recover_at_ms:
                broker.failed = False
                broker.heartbeat_at_ms = self.now
                restart = workload.random() < RESTART_SHARE and broker.epoch >= 0
                if restart:  # a new process: a new incarnation, registered anew
                    self._count("broker_restart")
                    broker.incarnation += 1
                    broker.stale_epoch, broker.epoch = broker.epoch, -1
                self._trace(f"broker {broker.broker_id} {'restarts' if restart else 'recovers'}")
            if broker.cut_off_until_ms >= 0 and self.now >= broker.cut_off_until_ms:
                broker.cut_off_until_ms = -1
                broker.heartbeat_at_ms = self.now
                self._trace(f"broker {broker.broker_id} reaches the controllers again")
            elif not broker.failed and broker.cut_off_until_ms < 0 and workload.random() < BROKER_CUT_OFF_RATE:
                # Longer than a session: the controllers fence it while its partition leaders,
                # which still see it fetch, ask for it back in their ISRs.
                broker.cut_off_until_ms = self.now + SESSION_TIMEOUT_MS + workload.next_int(BROKER_DOWN_MAX_MS)
                self._count("broker_cut_off")
                self.calls.pop(owner, None)
                self._trace(f"broker {broker.broker_id} is cut off from the controllers")

    def _partition_leaders(self) -> None:
        """Every live partition leader compares its ISR with its followers' liveness, as seen in a
        node's committed image (the node a broker would read its metadata from), and asks for the
        change; one AlterPartition in flight per leader broker."""
        up = [n for n in self.nodes.values() if n.core is not None and not n.persisting]
        if not up:
            return
        source = up[self.rng.next_int(len(up))].node_id
        image = self.qcs[source].controller.committed_image
        self.oracle.told(image, lambda: f"node {source}'s committed image")
        states = _partition_states(image)
        for state in states:
            for replica in state.replicas:
                self.replica_seen_ms.setdefault((state.topic_id, state.partition, replica), self.now)
        live = {b.broker_id: b.liveness() for b in self.brokers if b.epoch >= 0 and not b.failed}
        changes = isr_changes(
            states,
            live,
            self.now,
            catch_up_ms=CATCH_UP_MS,
            replica_lag_time_max_ms=REPLICA_LAG_TIME_MAX_MS,
            replica_seen_since_ms=self.replica_seen_ms,
        )
        if self.no_isr_expansion:
            changes = [c for c in changes if not c.added]
        # A leader's followers may include brokers that are down and not in ``live``: their
        # epochs are the last ones the leaders knew.
        epochs = {b.broker_id: b.liveness() for b in self.brokers}
        for leader, request in alter_partition_requests(changes, epochs).items():
            owner = f"leader-{leader}"
            if owner not in self.calls:
                self.calls[owner] = Call(owner, "AlterPartition", request, self.now)

    def _read_request(self) -> controller_pb2.DescribeTopicsRequest:
        """Every topic; every other read is one small page from the middle of the names, half of
        those of names only (listing topics), so the check covers paged answers too (chosen
        without drawing from the rng: seeds keep their runs)."""
        if self._next_topic % 2 == 0:
            return controller_pb2.DescribeTopicsRequest()
        cursor = controller_pb2.DescribeTopicsCursor(topic_name=f"t{self._next_topic // 2}")
        return controller_pb2.DescribeTopicsRequest(
            response_partition_limit=5, cursor=cursor, exclude_partitions=self._next_topic % 4 == 3
        )

    def _send_call(self, call: Call) -> None:
        # A paused node is reachable: the request waits in its inbox and is handled when it
        # resumes -- possibly before the node notices it lost its leadership meanwhile.
        up = [n for n in self.nodes.values() if n.core is not None and not n.persisting]
        if not up:
            call.retry_at_ms = self.now + RETRY_BACKOFF_MS
            return
        hint = call.leader_hint if call.leader_hint >= 0 else self.known_controller.get(call.owner, -1)
        if call.method == "DescribeTopics" and call.attempts == 0:
            # A read's first attempt goes to any node (Kafka's admin client sends metadata reads
            # to its least loaded node): a node that has been asleep may still think it leads.
            hint = -1
        hinted = [n for n in up if n.node_id == hint]
        node = hinted[0] if hinted else up[self.rng.next_int(len(up))]
        call.leader_hint = -1
        call.attempts += 1
        call.sent_ms = self.now
        call.retry_at_ms = self.now + _attempt_timeout_ms(call.owner)
        if self.params.drop_rate and self.rng.random() < self.params.drop_rate:
            call.key = self._next_key  # lost on the way: no answer, a retry after the timeout
            self._next_key += 1
            return
        call.key = self._next_key
        self._next_key += 1
        self.by_key[call.key] = call
        if node.paused_until > self.now:
            self._push_on_resume(node.paused_until, (node.node_id, node.incarnation, call.key))
            return
        self._submit(node, call)

    def _push_on_resume(self, at: int, payload: tuple[int, int, int]) -> None:
        """A request waiting for a paused node. On resume a real node's backlog (requests on many
        connections, its peers' messages) is handled in no particular order: half the time the
        request goes before every message queued for that moment, so a resumed deposed leader
        may handle it before it learns of the new epoch."""
        if self.rng.random() < 0.5:
            self._push(at, CUSTOM, payload)
            return
        self._next_id += 1
        heapq.heappush(self._queue, (at, -self._next_id, CUSTOM, payload))

    def _custom(self, payload: tuple[int, int, int] | LeaderProbe) -> None:
        """A leader probe answered, or a request that reached a paused node is handled now that it
        resumed (unless it crashed)."""
        if isinstance(payload, LeaderProbe):
            self._probe_answered(payload)
            return
        node_id, incarnation, key = payload
        node = self.nodes[node_id]
        call = self.by_key.get(key)
        if call is None or node.core is None or node.incarnation != incarnation:
            return
        if node.blocked(self.now):
            self._push_on_resume(max(self.now + 1, node.paused_until), payload)
            return
        self._submit(node, call)

    def _submit(self, node: SimNode, call: Call) -> None:
        if call.method == "DescribeTopics" and node.core is not None:
            # The read's index as the core defines it (RaftCore.read_index: the high watermark, and
            # at least the leader's first batch), and whatever any node has applied: the image
            # that answers must reach it.
            index = node.core.read_commit_point
            applied = max(n.applied_offset for n in self.nodes.values())
            self.oracle.arrived(node.node_id, call.key, max(applied, index) - 1)
        qc = self.qcs[node.node_id]
        _scale_turns(qc.controller)
        qc.submit(node.clock(self.now), call.key, call.method, call.request)
        self._drive(node)

    # -- the end of the run -----------------------------------------------------------------------
    def _heal_all(self) -> None:
        super()._heal_all()
        self._heal_brokers()
        self.heal_at = self.now
        # Answered at the moment of the heal, perhaps: acknowledged is in answer order.
        self.heal_probe = next((t for t, at in self.history.acknowledged.items() if at >= self.heal_at), None)

    def _heal_brokers(self) -> None:
        for broker in self.brokers:
            if broker.failed or broker.cut_off_until_ms >= 0:
                broker.failed = False
                broker.cut_off_until_ms = -1
                broker.heartbeat_at_ms = self.now

    def _converged(self) -> bool:
        """A create acknowledged after the heal is on every running voter, every call made before
        the heal is answered, every broker is registered and unfenced on the leader, every
        partition's ISR is its full replica set and its leader the preferred replica (L2)."""
        probe = self.heal_probe
        if probe is None:
            return False
        current = self.current_voters()
        voters = [self.qcs[n.node_id] for n in self.nodes.values() if n.core is not None and n.node_id in current]
        if not all(probe in qc.controller.committed_image.topic_ids for qc in voters):
            return False
        if any(call.invoked_ms < self.heal_at for call in self.calls.values()):
            return False
        leaders = [qc for qc in voters if qc.core.role is Role.LEADER and qc.active]
        if not leaders:
            return False
        image = leaders[0].controller.committed_image
        if not all(b.broker_id in image.brokers and not image.brokers[b.broker_id].fenced for b in self.brokers):
            return False
        return self.health.healthy(image)

    def _check_plane(self) -> None:
        history = self.history
        current = self.current_voters()
        for node in self.nodes.values():
            if node.core is None or node.node_id not in current:
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
        current = self.current_voters()
        running = [n for n in self.nodes.values() if n.core is not None and n.node_id in current]
        leaders = [n for n in running if n.core is not None and n.core.role is Role.LEADER]
        if len(leaders) != 1:
            return False
        end = leaders[0].applied_offset
        return all(n.applied_offset == end for n in running)

    def _leader_summary(self) -> str:
        """The base liveness message, plus what the plane still lacks (L2)."""
        summary = super()._leader_summary()
        leaders = [
            self.qcs[n.node_id]
            for n in self.nodes.values()
            if n.core is not None and n.core.role is Role.LEADER and self.qcs[n.node_id].active
        ]
        if leaders:
            image = leaders[0].controller.committed_image
            fenced = sorted(
                b.broker_id
                for b in self.brokers
                if b.broker_id not in image.brokers or image.brokers[b.broker_id].fenced
            )
            unhealthy = unhealthy_partitions(image)
            summary += (
                f"; fenced or unregistered brokers {fenced}; unhealthy partitions {unhealthy[:5]} ({len(unhealthy)})"
            )
        return summary

    def run(self, steps: int) -> RunResult:
        with planted(self.rule_bugs):
            return self._run_plane(steps)

    def _run_plane(self, steps: int) -> RunResult:
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
        self._check_history(result)
        for rule, times in self.oracle.checks.items():
            self._checked(f"rule-{rule}", times)
        return result

    def _check_history(self, result: RunResult) -> None:
        """Invariant 10: the client history is linearizable. Writes still waiting for an answer
        are open-ended. A run that already failed keeps its first violation and gains the
        timeline, when the history shows the failure too."""
        history = self.client_history
        for call in self.calls.values():
            if call.owner.startswith("client-") and not call.reused_id:  # a reused id must do nothing
                history.unanswered(call.owner, call.request, call.invoked_ms)
        checked = history.check()
        self._checked("10-linearizable-history", len(history.ops))
        if checked.verdict == "ok":
            return
        detail = f"the client history of {len(history.ops)} operations is {checked.describe()}"
        if checked.failures:
            result.history_failure = HistoryFailure(history.ops, checked.failures[0], detail)
        if result.violation is None:
            result.violation = InvariantViolation("10-linearizable-history", detail)


def _attempt_timeout_ms(owner: str) -> int:
    kind, _, number = owner.partition("-")
    return PATIENT_ATTEMPT_TIMEOUT_MS if kind == "client" and int(number) % 2 else ATTEMPT_TIMEOUT_MS


def _scale_turns(controller: Controller) -> None:
    """The turn budget (TURNS_PER_PASS) for the work the controller may start next, from the
    size of its working image: a work keeps the budget it started with."""
    partitions = controller.image.partition_count
    scan = max(SCAN_PARTITIONS_PER_TURN, partitions // TURNS_PER_PASS)
    changes = max(PARTITION_CHANGES_PER_BATCH, scan * PARTITION_CHANGES_PER_BATCH // SCAN_PARTITIONS_PER_TURN)
    config = controller.config
    if (config.scan_partitions_per_turn_max, config.partition_changes_per_batch_max) != (scan, changes):
        controller.config = replace(config, scan_partitions_per_turn_max=scan, partition_changes_per_batch_max=changes)


def _partition_states(image: MetadataImage) -> list[PartitionState]:
    return [
        PartitionState(topic.topic_id, pid, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr)
        for _, topic in image.topics.iter_items()
        for pid, p in enumerate(topic.partitions)
    ]


def _snapshot_interval_records(params: SimParams) -> int:
    """The QuorumController's snapshot interval for a seed: about as often as the base
    simulation's ``snapshot_every_batches`` (never when 0)."""
    every = params.snapshot_every_batches
    return every * SNAPSHOT_RECORDS_PER_BATCH if every else 1 << 40


def _records(data: bytes) -> list[records_pb2.MetadataRecord]:
    """The records of a snapshot (its batches: header, voters, the image's records, footer)."""
    return [record for batch in iter_batches(data) for record in decode_records(batch.data)]
