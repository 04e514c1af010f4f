"""The nemesis: a schedule of faults drawn from the seed, then carried out against the cluster.

The *plan* (which fault family and variant, how long it holds, the quiet gap after it) depends
only on the seed, the enabled families and the duration, so ``--seed`` reproduces it. Targets
that depend on the run (the current leader) are resolved when the fault starts, with a second
seeded random source for the other choices. Faults run one at a time; every one is healed
before the next starts, and every start and heal goes on the timeline.

Families and variants:

- ``kill``: SIGKILL one node / the leader / a majority / all nodes, restart after a short outage.
- ``pause``: SIGSTOP one node or the leader for longer than the fetch timeout, then SIGCONT.
- ``partition`` (through the proxies): isolate the leader; majority/minority split; a one-way
  partition (a node that can hear but not speak, or speak but not hear); a bridge (two sides
  that cannot see each other, one node seeing both); flapping (a split toggled every few hundred
  ms); delay (50-200 ms on every link of one node).
- ``torn-write``: SIGKILL a node, append a partial batch to its active segment, restart it.
- ``storage``: SIGKILL a minority of the nodes at once, damage a different committed batch of
  each one's log (a flipped bit or a zeroed sector; or 2-3 consecutive batches zeroed whole,
  :mod:`raftmeta.chaos.disk_damage`), restart
  them: each must repair its batch from the quorum with no operator. Or damage each one's
  ``quorum-state`` or high-watermark checkpoint (a flipped bit, a truncated or zeroed file,
  :mod:`raftmeta.chaos.state_damage`): each must set the file aside and rejoin with no operator,
  never voting twice in an epoch. Or, when a fault plan names the ``snapshot`` variant (not drawn),
  flip a bit of each one's newest snapshot (:mod:`raftmeta.chaos.snapshot_damage`): each must set
  it aside and recover its state from an older snapshot and its log, or from its leader.
- ``broker``: stop one or two simulated brokers' heartbeats past the session timeout (they are
  fenced, partition leaders move), then resume them (unfenced, leaderless partitions recover).
- ``kafka-broker`` (with real Kafka brokers, ``--kafka-brokers``, in place of ``broker``): SIGKILL
  one broker and restart it after its session has run out (fenced, its leaderships moved, out of
  every ISR), SIGSTOP one past its session then SIGCONT, or restart one through its controlled
  shutdown (SIGTERM, as kafka-server-stop); each fault ends once the broker is registered and
  unfenced again (the launcher's ready timeout bounds a JVM's start), so the next finds it running.
- ``membership``: voter changes through AddRaftVoter / RemoveRaftVoter -- add an observer, remove
  a voter (possibly the leader), replace one (add, then remove), or kill a voter and replace it
  while it is down (restarted after); targets from
  :mod:`raftmeta.chaos.membership`. Requests refused with REQUEST_TIMED_OUT (not now: the previous
  change or the leader's epoch is not committed, the observer is not caught up) are retried until
  the fault's hold time is spent; every attempt and its answer goes on the timeline and into
  :attr:`Nemesis.voter_requests`. Not in the default set: it needs observer nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from raftmeta.api.addresses import parse_host_port
from raftmeta.chaos import membership
from raftmeta.chaos.cluster import ChaosCluster
from raftmeta.chaos.disk_damage import DiskDamage, damage_committed_batch
from raftmeta.chaos.events import Timeline, wall_ms
from raftmeta.chaos.membership import Outcome, VoterChange, VoterRequest
from raftmeta.chaos.monitor import QuorumMonitor
from raftmeta.chaos.proxy import Link
from raftmeta.chaos.snapshot_damage import SNAPSHOT_VARIANT, SnapshotDamage, damage_newest_snapshot
from raftmeta.chaos.state_damage import (
    DAMAGE_KINDS,
    STATE_FILES,
    StateFileDamage,
    behind_vote_fence,
    damage_state_file,
)
from raftmeta.chaos.torn import append_torn_batch
from raftmeta.client import ClientError, ControllerClient, RetryPolicy
from raftmeta.kraft.cluster import KraftNodeError
from raftmeta.server.addresses import CONTROLLER_LISTENER
from raftmeta.storage.meta_properties import read_meta_properties
from raftmeta.storage.quorum_state import QUORUM_STATE
from raftmeta.v1 import controller_pb2, errors_pb2

# The default set (``--faults``'s default). ``membership`` is opted into: it adds an observer
# process and ends the run with another voter set, so the default runs keep the quorum they had.
DEFAULT_FAMILIES: tuple[str, ...] = ("kill", "pause", "partition", "torn-write", "storage", "broker")
FAMILIES: tuple[str, ...] = (*DEFAULT_FAMILIES, "membership", "kafka-broker")
# The simulated fleet's family and the real brokers' one: a run has one kind of broker.
FLEET_FAMILY = "broker"
KAFKA_BROKER_FAMILY = "kafka-broker"
VARIANTS: dict[str, tuple[str, ...]] = {
    "kill": ("one", "leader", "majority", "all"),
    "pause": ("one", "leader"),
    "partition": ("isolate-leader", "majority-minority", "one-way", "bridge", "flapping", "delay"),
    "torn-write": ("one", "leader"),
    "storage": ("bit-flip", "zeroed-sector", "zeroed-range", *STATE_FILES),
    "broker": ("one", "two"),
    "membership": membership.VARIANTS,
    "kafka-broker": ("kill", "pause", "restart"),
}
# Between two attempts of a voter change refused with REQUEST_TIMED_OUT (a catching-up observer
# needs a fetch round or two; a new leader, one commit of its epoch).
VOTER_RETRY_S = 0.25
# One attempt's client deadline: a change answers when it commits, within a fetch round or two.
VOTER_ATTEMPT_S = 3.0
# Quiet time before the first fault, so the workload has a baseline.
WARMUP_S = 2.0
# How often a quorum-state fault looks again whether another voter's vote fence has lifted.
FENCE_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class FaultStep:
    family: str
    variant: str
    hold_s: float
    gap_s: float


def parse_families(text: str) -> list[str]:
    families = [f.strip() for f in text.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise ValueError(f"unknown fault kinds {unknown}: choose from {','.join(FAMILIES)}")
    return list(dict.fromkeys(families))


def default_families(kafka_brokers: int) -> tuple[str, ...]:
    """``--faults``'s default: with real Kafka brokers, their faults in place of the fleet's."""
    if not kafka_brokers:
        return DEFAULT_FAMILIES
    return tuple(KAFKA_BROKER_FAMILY if f == FLEET_FAMILY else f for f in DEFAULT_FAMILIES)


def check_broker_families(families: Sequence[str], kafka_brokers: int) -> None:
    """A run breaks the kind of brokers it has: ValueError naming the fault kind otherwise."""
    if kafka_brokers and FLEET_FAMILY in families:
        raise ValueError(
            f"fault kind {FLEET_FAMILY!r} stops simulated brokers' heartbeats: with --kafka-brokers the brokers are "
            f"real, use {KAFKA_BROKER_FAMILY!r}"
        )
    if not kafka_brokers and KAFKA_BROKER_FAMILY in families:
        raise ValueError(f"fault kind {KAFKA_BROKER_FAMILY!r} needs real Kafka brokers: add --kafka-brokers N")


def hold_range_s(family: str, fetch_timeout_s: float, session_timeout_s: float) -> tuple[float, float]:
    """How long a fault of ``family`` lasts: long enough to matter (past the timeouts it tests)."""
    if family == "pause":
        return 1.5 * fetch_timeout_s, 3.0 * fetch_timeout_s
    if family in (FLEET_FAMILY, KAFKA_BROKER_FAMILY):
        # Past the session, so the controller fences the broker and moves its leaderships (a
        # restart's outage is its JVM's start, which the launcher bounds).
        return session_timeout_s + 1.0, session_timeout_s + 2.5
    if family == "partition":
        return 3.0, 6.0
    if family == "membership":
        # How long its requests are retried: a change commits in a fetch round or two, an observer
        # catches up within a fetch timeout, and an election in between takes about as much.
        return 2.0 * fetch_timeout_s, 4.0 * fetch_timeout_s
    return 0.5, 2.5  # kill, torn-write, storage: the outage before the restart


def plan_faults(
    seed: int, families: Sequence[str], duration_s: float, *, fetch_timeout_s: float, session_timeout_s: float
) -> list[FaultStep]:
    """Faults that fit in ``duration_s``; families (and each family's variants) taken in shuffled
    rounds, so a run long enough for one round has every family at least once."""
    rng = random.Random(seed)
    variants = {f: rng.sample(VARIANTS[f], len(VARIANTS[f])) for f in families}
    used = dict.fromkeys(families, 0)
    steps: list[FaultStep] = []
    t = WARMUP_S
    bounded_rounds = 1000
    for _ in range(bounded_rounds):
        order = rng.sample(list(families), len(families))
        for family in order:
            low, high = hold_range_s(family, fetch_timeout_s, session_timeout_s)
            hold = round(rng.uniform(low, high), 2)
            gap = round(rng.uniform(1.0, 2.5), 2)
            if t + hold > duration_s:
                return steps
            variant = variants[family][used[family] % len(variants[family])]
            used[family] += 1
            steps.append(FaultStep(family, variant, hold, gap))
            t += hold + gap
    return steps


class Nemesis:
    def __init__(
        self, cluster: ChaosCluster, monitor: QuorumMonitor, timeline: Timeline, seed: int, steps: list[FaultStep]
    ) -> None:
        self.cluster = cluster
        self.monitor = monitor
        self.timeline = timeline
        self.rng = random.Random(seed ^ 0x5EED)
        self.steps = steps
        self.counts: dict[str, int] = dict.fromkeys(FAMILIES, 0)
        self._next_id = 0
        self.voter_requests: list[VoterRequest] = []  # every AddRaftVoter / RemoveRaftVoter attempt
        self.disk_damage: list[DiskDamage] = []  # every committed batch the storage faults damaged
        self.state_damage: list[StateFileDamage] = []  # every state file the storage faults damaged
        self.snapshot_damage: list[SnapshotDamage] = []  # every snapshot the storage faults damaged
        self._voter_client: ControllerClient | None = None
        self._stop = asyncio.Event()  # run()'s: set when the fault phase ends

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        try:
            await self._run(stop)
        finally:
            if self._voter_client is not None:
                await self._voter_client.close()

    async def _run(self, stop: asyncio.Event) -> None:
        await _sleep_unless(stop, WARMUP_S)
        for step in self.steps:
            if stop.is_set():
                return
            try:
                await self._carry_out(step)
            except (OSError, grpc.RpcError) as exc:
                # A fault that could not be carried out is logged, not fatal: the final heal
                # restores everything, and the checks judge the run as it happened.
                self.timeline.add("heal", step.family, f"fault could not be completed: {exc}", self._next_id - 1)
            await _sleep_unless(stop, step.gap_s)

    async def _carry_out(self, step: FaultStep) -> None:
        fault_id = self._next_id
        self._next_id += 1
        self.counts[step.family] += 1
        handler = {
            "kill": self._kill,
            "pause": self._pause,
            "partition": self._partition,
            "torn-write": self._torn_write,
            "storage": self._storage,
            "broker": self._broker,
            "membership": self._membership,
            "kafka-broker": self._kafka_broker,
        }[step.family]
        await handler(step, fault_id)

    # -- target choice ---------------------------------------------------------------------------
    async def _leader_or_any(self) -> int:
        leader = await self.monitor.current_leader()
        return leader if leader in self.cluster.node_ids else self.rng.choice(self.cluster.node_ids)

    async def _targets(self, variant: str) -> list[int]:
        ids = self.cluster.node_ids
        if variant == "leader":
            return [await self._leader_or_any()]
        if variant == "majority":
            return sorted(self.rng.sample(ids, len(ids) // 2 + 1))
        if variant == "all":
            return list(ids)
        return [self.rng.choice(ids)]

    # -- process faults --------------------------------------------------------------------------
    async def _kill(self, step: FaultStep, fault_id: int) -> None:
        targets = await self._targets(step.variant)
        for node in targets:
            self.cluster.kill(node)
        self.timeline.add("fault", "kill", f"SIGKILL {step.variant}: nodes {targets}", fault_id)
        await asyncio.sleep(step.hold_s)
        for node in targets:
            await self.cluster.wait_dead(node)
            self.cluster.restart(node)
        self.timeline.add("heal", "kill", f"restarted nodes {targets}", fault_id)

    async def _torn_write(self, step: FaultStep, fault_id: int) -> None:
        (node,) = await self._targets(step.variant)
        self.cluster.kill(node)
        await self.cluster.wait_dead(node)
        torn = await asyncio.to_thread(append_torn_batch, self.cluster.node_dir(node), self.rng)
        what = torn.describe() if torn is not None else "no segment yet, nothing torn"
        self.timeline.add("fault", "torn-write", f"SIGKILL node {node}, then {what}", fault_id)
        await asyncio.sleep(step.hold_s)
        self.cluster.restart(node)
        self.timeline.add("heal", "torn-write", f"restarted node {node}", fault_id)

    async def _storage(self, step: FaultStep, fault_id: int) -> None:
        """A minority killed at once, a different committed batch (or the variant's state file)
        damaged on each, restarted."""
        ids = self.cluster.node_ids
        if step.variant == QUORUM_STATE:
            # One node at a time, and only once no other voter is behind its vote fence: a fenced
            # voter votes again only when every other voter has answered it with its epoch, and
            # a fenced voter is no witness for another, so two fenced voters out of three (or
            # two damaged at once out of five, each waiting for the other) never elect again --
            # the documented limit (docs/storage.md), as the simulator's storage faults keep it.
            # A restart under load can outlast the gap between two faults: wait on the nodes'
            # own files, not on a guess.
            targets = [self.rng.choice(ids)]
            if not await self._no_other_fence(targets[0]):
                self.timeline.add("fault", "storage", "skipped: a voter is still behind its vote fence", fault_id)
                return
        else:
            targets = sorted(self.rng.sample(ids, max(1, (len(ids) - 1) // 2)))
        for node in targets:
            self.cluster.kill(node)
        # Never an offset damaged before in this run, on any node: a majority of damaged copies of
        # one batch may be unrepairable by design.
        avoid = {base for d in self.disk_damage for base in d.bases}
        done: list[str] = []
        for node in targets:
            await self.cluster.wait_dead(node)
            if step.variant in STATE_FILES:
                done.append(await self._damage_state_file(node, step.variant))
                continue
            if step.variant == SNAPSHOT_VARIANT:
                snapshot = await asyncio.to_thread(damage_newest_snapshot, node, self.cluster.node_dir(node), self.rng)
                if snapshot is None:
                    done.append(f"node {node} has no snapshot yet")
                    continue
                self.snapshot_damage.append(snapshot)
                done.append(snapshot.describe())
                continue
            damage = await asyncio.to_thread(
                damage_committed_batch, node, self.cluster.node_dir(node), step.variant, self.rng, avoid
            )
            if damage is None:
                done.append(f"node {node} holds no committed batch to damage yet")
                continue
            self.disk_damage.append(damage)
            avoid.update(damage.bases)
            done.append(damage.describe())
        self.timeline.add("fault", "storage", f"SIGKILL nodes {targets}, then {'; '.join(done)}", fault_id)
        await asyncio.sleep(step.hold_s)
        for node in targets:
            self.cluster.restart(node)
        self.timeline.add("heal", "storage", f"restarted nodes {targets}", fault_id)

    async def _no_other_fence(self, target: int) -> bool:
        """Wait until no voter but ``target`` is behind its vote fence (its quorum-state says so);
        False if the fault phase ended first. A fence closes once every other voter has answered
        the fenced node's probes, which its request timeout repeats."""
        others = [self.cluster.node_dir(i) for i in self.cluster.node_ids if i != target]
        while not self._stop.is_set():
            fenced = await asyncio.to_thread(lambda: [d for d in others if behind_vote_fence(d)])
            if not fenced:
                return True
            # The fence lifts inside the node, with no event this process can await: poll its file.
            await _sleep_unless(self._stop, FENCE_POLL_S)
        return False

    async def _damage_state_file(self, node: int, file: str) -> str:
        kind = self.rng.choice(DAMAGE_KINDS)
        node_dir = self.cluster.node_dir(node)
        damage = await asyncio.to_thread(damage_state_file, node, node_dir, file, kind, self.rng)
        if damage is None:
            return f"node {node} has written no {file} yet"
        self.state_damage.append(damage)
        return damage.describe()

    async def _pause(self, step: FaultStep, fault_id: int) -> None:
        (node,) = await self._targets(step.variant)
        self.cluster.pause(node)
        self.timeline.add("fault", "pause", f"SIGSTOP {step.variant}: node {node} for {step.hold_s} s", fault_id)
        await asyncio.sleep(step.hold_s)
        self.cluster.resume(node)
        self.timeline.add("heal", "pause", f"SIGCONT node {node}", fault_id)

    # -- network faults --------------------------------------------------------------------------
    def _cut(self, side_a: Sequence[int], side_b: Sequence[int]) -> set[Link]:
        return {(a, b) for a in side_a for b in side_b} | {(b, a) for a in side_a for b in side_b}

    async def _partition(self, step: FaultStep, fault_id: int) -> None:
        ids = self.cluster.node_ids
        network = self.cluster.network
        shuffled = self.rng.sample(ids, len(ids))
        if step.variant == "delay":
            node = self.rng.choice(ids)
            delay_ms = self.rng.randint(50, 200)
            links = {(node, j) for j in ids if j != node} | {(j, node) for j in ids if j != node}
            network.set_delay(links, delay_ms)
            self.timeline.add("fault", "partition", f"delay {delay_ms} ms on every link of node {node}", fault_id)
            await asyncio.sleep(step.hold_s)
            network.set_delay(links, 0)
            self.timeline.add("heal", "partition", f"delay removed from node {node}", fault_id)
            return
        if step.variant == "isolate-leader":
            leader = await self._leader_or_any()
            links = self._cut([leader], [j for j in ids if j != leader])
            detail = f"isolate leader {leader}"
        elif step.variant == "one-way":
            node = shuffled[0]
            others = [j for j in ids if j != node]
            if self.rng.random() < 0.5:
                links, detail = {(node, j) for j in others}, f"one-way: node {node} hears but is not heard"
            else:
                links, detail = {(j, node) for j in others}, f"one-way: node {node} is heard but hears nothing"
        elif step.variant == "bridge":
            half = len(ids) // 2
            left, bridge, right = shuffled[:half], shuffled[half], shuffled[half + 1 :]
            links = self._cut(left, right)
            detail = f"bridge: {sorted(left)} | {bridge} | {sorted(right)}"
        else:  # majority-minority, flapping
            # (n - 1) // 2: a strict minority also with an even count of nodes (observers included).
            minority = shuffled[: (len(ids) - 1) // 2]
            majority = shuffled[(len(ids) - 1) // 2 :]
            links = self._cut(minority, majority)
            detail = f"{step.variant}: {sorted(majority)} | {sorted(minority)}"
        network.block(links)
        self.timeline.add("fault", "partition", detail, fault_id)
        if step.variant == "flapping":
            await self._flap(links, step.hold_s)
        else:
            await asyncio.sleep(step.hold_s)
        network.unblock(links)
        self.timeline.add("heal", "partition", f"healed ({detail})", fault_id)

    async def _flap(self, links: set[Link], hold_s: float) -> None:
        network = self.cluster.network
        loop = asyncio.get_running_loop()
        end = loop.time() + hold_s
        blocked = True
        while loop.time() < end:
            await asyncio.sleep(min(self.rng.uniform(0.3, 0.8), max(0.0, end - loop.time())))
            if blocked:
                network.unblock(links)
            else:
                network.block(links)
            blocked = not blocked
        network.block(links)  # the caller unblocks, so end in the blocked state

    # -- broker faults ---------------------------------------------------------------------------
    async def _broker(self, step: FaultStep, fault_id: int) -> None:
        count = 1 if step.variant == "one" else 2
        brokers = sorted(self.rng.sample(range(self.cluster.config.brokers), count))
        await self.cluster.fleet_call("FailBrokers", brokers)
        self.timeline.add(
            "fault", "broker", f"brokers {brokers} stop heartbeating (fenced after the session)", fault_id
        )
        await asyncio.sleep(step.hold_s)
        await self.cluster.fleet_call("RecoverBrokers", brokers)
        self.timeline.add("heal", "broker", f"brokers {brokers} heartbeat again", fault_id)

    async def _kafka_broker(self, step: FaultStep, fault_id: int) -> None:
        brokers = self.cluster.kafka
        if brokers is None:
            raise ValueError("kafka-broker faults need real Kafka brokers (ClusterConfig.kafka_brokers)")
        broker = self.rng.choice(brokers.ids)
        try:
            if step.variant == "pause":
                brokers.pause(broker)
                self.timeline.add("fault", step.family, f"SIGSTOP Kafka broker {broker} for {step.hold_s} s", fault_id)
                await asyncio.sleep(step.hold_s)
                brokers.resume(broker)
                await brokers.wait_ready(broker)
                self.timeline.add("heal", step.family, f"SIGCONT Kafka broker {broker}: unfenced again", fault_id)
                return
            if step.variant == "kill":
                await brokers.kill(broker)
                self.timeline.add("fault", step.family, f"SIGKILL Kafka broker {broker}", fault_id)
                await asyncio.sleep(step.hold_s)
            else:
                self.timeline.add(
                    "fault", step.family, f"SIGTERM Kafka broker {broker} (controlled shutdown)", fault_id
                )
                await brokers.stop(broker)
            await brokers.start_and_wait(broker)
            self.timeline.add("heal", step.family, f"Kafka broker {broker} restarted: registered, unfenced", fault_id)
        except KraftNodeError as exc:
            # Left to the heal (which starts it again) and the checks (a broker that exits on its
            # own is a crash); the message names the broker and quotes its log's tail.
            self.timeline.add("heal", step.family, f"Kafka broker {broker} not ready again: {exc}"[:2000], fault_id)

    # -- voter changes ---------------------------------------------------------------------------
    async def _membership(self, step: FaultStep, fault_id: int) -> None:
        answer = await self.monitor.describe()
        if answer is None or answer.leader_id < 0:
            self.timeline.add("fault", "membership", f"{step.variant}: no leader answers, no change", fault_id)
            self.timeline.add("heal", "membership", "nothing to undo", fault_id)
            return
        voters = sorted(v.replica_id for v in answer.voters)
        victim = (
            membership.choose_victim(voters, answer.leader_id, self.rng) if step.variant == "replace-crashed" else None
        )
        if victim is not None:
            self.cluster.kill(victim)
            await self.cluster.wait_dead(victim)
        down = (
            self.cluster.killed
            | self.cluster.paused
            | {n for n in self.cluster.node_ids if not self.cluster.running(n)}
        )
        plan = membership.choose_changes(step.variant, voters, self.cluster.node_ids, down, answer.leader_id, self.rng)
        killed = f"SIGKILL node {victim}, then " if victim is not None else ""
        self.timeline.add(
            "fault",
            "membership",
            f"{step.variant}: {killed}{plan.describe()}; voters {voters}, leader {answer.leader_id}, "
            f"down {sorted(down)}",
            fault_id,
        )
        loop = asyncio.get_running_loop()
        outcome: Outcome = "ok"
        try:
            for change in plan.changes:
                # Each change gets the whole hold time: a replacement's removal waits for its
                # addition to commit (one change at a time), then has the same chance to go through.
                outcome = await self._change_voter(change, fault_id, loop.time() + step.hold_s)
                if outcome != "ok":
                    break  # a replacement whose addition did not commit removes nobody
        finally:
            if victim is not None:
                self.cluster.restart(victim)  # whatever happened: the next fault finds it running
        after = await self.monitor.describe()
        now = sorted(v.replica_id for v in after.voters) if after is not None and after.leader_id >= 0 else None
        restarted = f"; restarted node {victim}" if victim is not None else ""
        self.timeline.add(
            "heal", "membership", f"{step.variant}: last answer {outcome}; voters now {now}{restarted}", fault_id
        )

    async def _change_voter(self, change: VoterChange, fault_id: int, deadline: float) -> Outcome:
        """Send one change until it is answered other than REQUEST_TIMED_OUT or the deadline
        passes; every attempt is recorded. Returns the last attempt's outcome."""
        if self._voter_client is None:
            # The nodes' real addresses, as an operator's tool: a voter change is admin traffic.
            self._voter_client = ControllerClient(
                self.cluster.bootstrap, retry=RetryPolicy(deadline_s=VOTER_ATTEMPT_S, attempt_timeout_s=1.5)
            )
        meta = await asyncio.to_thread(read_meta_properties, self.cluster.node_dir(change.node))
        directory_id = meta.directory_id if meta is not None else b""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            invoked = wall_ms()
            outcome, error = await self._send_change(change, directory_id)
            self.voter_requests.append(
                VoterRequest(fault_id, attempt, change.kind, change.node, invoked, wall_ms(), outcome, error)
            )
            self.timeline.add(
                "request", "membership", f"{change} (attempt {attempt}): {outcome}{f' {error}' if error else ''}",
                fault_id,
            )  # fmt: skip
            attempt += 1
            retry = outcome == "unknown" or error == "REQUEST_TIMED_OUT"
            if not retry or loop.time() + VOTER_RETRY_S >= deadline:
                return outcome
            await asyncio.sleep(VOTER_RETRY_S)

    async def _send_change(self, change: VoterChange, directory_id: bytes) -> tuple[Outcome, str]:
        """(outcome, error name) of one attempt."""
        assert self._voter_client is not None
        try:
            if change.kind == "add":
                host, port = parse_host_port(self.cluster.address(change.node), f"node {change.node}'s address")
                # The node's real listener goes into the log; the other nodes reach it through the
                # proxies all the same (their configured address for it wins).
                listener = controller_pb2.RaftVoterListener(name=CONTROLLER_LISTENER, host=host, port=port)
                added = await self._voter_client.add_raft_voter(
                    controller_pb2.AddRaftVoterRequest(
                        voter_id=change.node, voter_directory_id=directory_id, listeners=[listener]
                    )
                )
                code = added.error_code
            else:
                removed = await self._voter_client.remove_raft_voter(
                    controller_pb2.RemoveRaftVoterRequest(voter_id=change.node, voter_directory_id=directory_id)
                )
                code = removed.error_code
        except ClientError as exc:
            # No answer (the deadline ran out, no node reachable): the change may still commit.
            return "unknown", str(exc)[:200]
        if code == errors_pb2.NONE:
            return "ok", ""
        return "fail", errors_pb2.ErrorCode.Name(code)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
