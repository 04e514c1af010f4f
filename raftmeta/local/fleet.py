"""A fleet of simulated brokers: they register with the controller, heartbeat, and lead partitions.

raftmeta has no data plane, but the controller's broker lifecycle is real: a broker that stops
heartbeating is fenced after ``broker.session.timeout.ms`` and its partitions elect new leaders
(seed 002); a broker that heartbeats again is unfenced. The fleet makes that observable:
``FailBrokers`` stops a broker's heartbeats, ``RecoverBrokers`` resumes them, ``ShutdownBrokers``
runs Kafka's controlled shutdown (leaderships and ISR memberships move away first, then the broker
stops). The fleet's control service is advertised as each broker's ``FLEET`` endpoint so the CLI
can find it from any node.

Partition leaders (:mod:`raftmeta.local.partition_leader`): every ``isr_check_interval_ms`` while an
ISR change may be due (a broker came up or went down recently), and once per
``replica_lag_time_max_ms`` otherwise, the fleet reads the partitions (a stale read from the node
it talks to, as a broker's metadata cache lags), and each partition led by one of its live
brokers sends AlterPartition when a follower's broker has been up for ``catch_up_delay_ms`` (it
joins the ISR) or down for longer than ``replica_lag_time_max_ms`` (it leaves). A steady fleet
does not read the whole image every second. So a recovered broker rejoins its ISRs by itself, and the
controller's automatic preferred-leader election then gives it its leaderships back.

Heartbeats use a per-call deadline well under the session timeout, and a call that fails moves
the broker's client on to another node: a paused or partitioned node cannot get the fleet fenced.

Reassignment catch-up (KIP-455 without a data plane): each heartbeat answer lists the partitions
the broker is adding (``adding_replicas``). The broker notes when it first heard of each, "copies"
it for ``catch_up_delay_ms``, and then reports it in ``caught_up_replicas`` on every heartbeat
until the controller stops listing it (it joined the ISR, or the move was cancelled). A failed
broker copies nothing: the delay restarts when it is told again after it recovers.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import grpc
import grpc.aio

from raftmeta.api.addresses import join_host_port, parse_host_port
from raftmeta.api.ids import id_text
from raftmeta.api.limits import grpc_channel_options
from raftmeta.client import ClientError, ControllerClient
from raftmeta.local.partition_leader import (
    REPLICA_LAG_TIME_MAX_MS,
    BrokerLiveness,
    alter_partition_requests,
    isr_changes,
    partition_states,
)
from raftmeta.logs import get_logger
from raftmeta.v1 import controller_pb2, errors_pb2, fleet_pb2, fleet_pb2_grpc

FLEET_ENDPOINT = "FLEET"
log = get_logger("fleet")


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    broker_id: int
    rack: str | None = None
    pool: str | None = None


def rack_name(index: int) -> str:
    """rack-a, rack-b, ..., rack-z, rack-aa, ... (stable, readable names)."""
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("a") + remainder) + letters
    return f"rack-{letters}"


def plan_fleet(
    count: int, racks: int, pools: Mapping[str, Sequence[int]] | None = None, first_id: int = 0
) -> list[BrokerSpec]:
    """``count`` brokers with ids from ``first_id``; broker i sits in rack ``i mod racks`` (racks = 0:
    no rack information); ``pools`` maps a pool name to the broker ids in it."""
    if count < 1:
        raise ValueError(f"--brokers must be at least 1, got {count}")
    if racks < 0 or racks > count:
        raise ValueError(f"--racks must be between 0 and the number of brokers ({count}), got {racks}")
    pool_of: dict[int, str] = {}
    ids = range(first_id, first_id + count)
    for pool, members in (pools or {}).items():
        for broker_id in members:
            if broker_id not in ids:
                raise ValueError(
                    f"pool {pool!r} names broker {broker_id}, which is not in the fleet ({ids.start}..{ids.stop - 1})"
                )
            if broker_id in pool_of:
                raise ValueError(f"broker {broker_id} is in two pools: {pool_of[broker_id]!r} and {pool!r}")
            pool_of[broker_id] = pool
    return [
        BrokerSpec(broker_id=i, rack=rack_name((i - first_id) % racks) if racks else None, pool=pool_of.get(i))
        for i in ids
    ]


@dataclass
class BrokerState:
    spec: BrokerSpec
    incarnation_id: bytes = field(default_factory=lambda: uuid.uuid4().bytes)
    broker_epoch: int = -1
    fenced: bool = True
    failed: bool = False
    last_heartbeat_monotonic: float | None = None
    heartbeats: int = 0
    resumed: asyncio.Event = field(default_factory=asyncio.Event)
    # (topic id, partition) -> monotonic time the controller first listed it as being added here.
    adding_since: dict[tuple[bytes, int], float] = field(default_factory=dict)
    caught_up_reported: int = 0
    # Liveness as partition leaders see it (monotonic seconds): up = heartbeating and unfenced.
    up_since: float | None = None
    down_since: float | None = None
    # Controlled shutdown: asked for (heartbeats say want_shutdown_now), then done (stopped).
    shutting_down: bool = False
    shut_down: bool = False
    alter_partition_sent: int = 0
    isr_changes_accepted: int = 0

    def liveness(self) -> BrokerLiveness:
        return BrokerLiveness(
            self.broker_epoch,
            None if self.up_since is None else int(self.up_since * 1000),
            None if self.down_since is None else int(self.down_since * 1000),
        )

    def went_down(self, now: float) -> None:
        if self.up_since is not None:
            self.up_since = None
            self.down_since = now

    def to_proto(self, now: float) -> fleet_pb2.FleetBrokerState:
        state = fleet_pb2.FleetBrokerState(
            broker_id=self.spec.broker_id,
            failed=self.failed,
            broker_epoch=self.broker_epoch,
            fenced=self.fenced,
            last_heartbeat_ms_ago=(
                -1 if self.last_heartbeat_monotonic is None else int((now - self.last_heartbeat_monotonic) * 1000)
            ),
            shut_down=self.shut_down,
            alter_partition_sent=self.alter_partition_sent,
            isr_changes_accepted=self.isr_changes_accepted,
        )
        if self.spec.rack is not None:
            state.rack = self.spec.rack
        if self.spec.pool is not None:
            state.pool = self.spec.pool
        return state


class BrokerFleet:
    """Runs one registration/heartbeat loop per simulated broker."""

    def __init__(
        self,
        client: ControllerClient,
        specs: Sequence[BrokerSpec],
        *,
        heartbeat_interval_ms: int = 1000,
        control_address: str = "",
        catch_up_delay_ms: int = 0,
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
        isr_check_interval_ms: int = 1000,
    ) -> None:
        if heartbeat_interval_ms < 10:
            raise ValueError(f"heartbeat interval must be at least 10 ms, got {heartbeat_interval_ms}")
        if catch_up_delay_ms < 0:
            raise ValueError(f"catch-up delay must not be negative, got {catch_up_delay_ms}")
        if replica_lag_time_max_ms < 1 or isr_check_interval_ms < 10:
            raise ValueError(
                "replica lag time must be at least 1 ms and the ISR check interval at least 10 ms, got "
                f"{replica_lag_time_max_ms} and {isr_check_interval_ms}"
            )
        self.catch_up_delay_ms = catch_up_delay_ms
        self.catch_up_delay_s = catch_up_delay_ms / 1000
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_check_interval_s = isr_check_interval_ms / 1000
        # (topic id, partition, broker) -> monotonic ms the leaders first saw that replica assigned.
        self.replica_seen_ms: dict[tuple[bytes, int, int], int] = {}
        self.client = client
        self.states = {spec.broker_id: BrokerState(spec) for spec in specs}
        for state in self.states.values():
            state.resumed.set()
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.control_address = control_address
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._run_broker(state)) for state in self.states.values()]
        self._tasks.append(asyncio.create_task(self._run_partition_leaders()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _check_ids(self, broker_ids: Sequence[int]) -> None:
        unknown = sorted(set(broker_ids) - set(self.states))
        if unknown:
            raise KeyError(f"brokers {unknown} are not in this fleet (it has {sorted(self.states)})")

    def fail(self, broker_ids: Sequence[int]) -> None:
        self._check_ids(broker_ids)
        for broker_id in broker_ids:
            state = self.states[broker_id]
            state.failed = True
            state.resumed.clear()
            state.adding_since.clear()  # a crashed broker's copies start over
            state.went_down(time.monotonic())
            log.info("broker failed (heartbeats stopped)", broker_id=broker_id)

    def recover(self, broker_ids: Sequence[int]) -> None:
        self._check_ids(broker_ids)
        for broker_id in broker_ids:
            state = self.states[broker_id]
            if state.shut_down:
                # A broker that shut down starts again as a new process: a new incarnation, which
                # registers anew (Kafka's restart), rather than resuming the old session.
                state.incarnation_id = uuid.uuid4().bytes
                state.broker_epoch = -1
                state.shut_down = False
            state.shutting_down = False
            state.failed = False
            state.resumed.set()
            log.info("broker recovered (heartbeats resumed)", broker_id=broker_id)

    async def shutdown(self, broker_ids: Sequence[int], timeout_s: float) -> None:
        """Kafka's controlled shutdown for each broker: its heartbeats ask for it until the
        controller says it is done, then the broker stops. Returns once all have stopped; raises
        TimeoutError if they have not within ``timeout_s``."""
        self._check_ids(broker_ids)
        for broker_id in broker_ids:
            state = self.states[broker_id]
            if state.failed or state.broker_epoch < 0:
                raise ValueError(
                    f"broker {broker_id} is not running (failed, shut down or never registered): "
                    "only a running broker can shut down in a controlled way"
                )
        for broker_id in broker_ids:
            self.states[broker_id].shutting_down = True
            log.info("controlled shutdown requested", broker_id=broker_id)
        deadline = time.monotonic() + timeout_s
        while not all(self.states[b].shut_down for b in broker_ids):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"brokers {sorted(b for b in broker_ids if not self.states[b].shut_down)} did not finish "
                    f"their controlled shutdown within {timeout_s:g} s (is the quorum reachable?)"
                )
            await asyncio.sleep(min(0.05, self.heartbeat_interval_s))

    def status(self) -> fleet_pb2.FleetStatus:
        now = time.monotonic()
        return fleet_pb2.FleetStatus(brokers=[self.states[i].to_proto(now) for i in sorted(self.states)])

    def _register_request(self, state: BrokerState) -> controller_pb2.RegisterBrokerRequest:
        request = controller_pb2.RegisterBrokerRequest(
            broker_id=state.spec.broker_id, incarnation_id=state.incarnation_id
        )
        if state.spec.rack is not None:
            request.rack = state.spec.rack
        if state.spec.pool is not None:
            request.pool = state.spec.pool
        if self.control_address:
            host, port = parse_host_port(self.control_address, "the fleet's control address")
            request.endpoints.append(controller_pb2.BrokerEndpointInfo(name=FLEET_ENDPOINT, host=host, port=port))
        return request

    async def _run_broker(self, state: BrokerState) -> None:
        while True:
            await state.resumed.wait()
            try:
                if state.broker_epoch < 0:
                    await self._register(state)
                else:
                    await self._heartbeat(state)
            except ClientError as exc:
                # The quorum may be electing a leader; keep the broker's rhythm and try again.
                log.debug("broker call failed", broker_id=state.spec.broker_id, error=str(exc))
            await asyncio.sleep(self.heartbeat_interval_s)

    async def _register(self, state: BrokerState) -> None:
        response = await self.client.register_broker(self._register_request(state))
        if response.error_code != errors_pb2.NONE:
            log.warning(
                "registration refused",
                broker_id=state.spec.broker_id,
                error=errors_pb2.ErrorCode.Name(response.error_code),
                message=response.error_message,
            )
            return
        state.broker_epoch = response.broker_epoch
        log.info("broker registered", broker_id=state.spec.broker_id, broker_epoch=state.broker_epoch)

    async def _heartbeat(self, state: BrokerState) -> None:
        request = controller_pb2.BrokerHeartbeatRequest(
            broker_id=state.spec.broker_id, broker_epoch=state.broker_epoch, want_shutdown_now=state.shutting_down
        )
        now = time.monotonic()
        for (topic_id, partition_id), since in sorted(state.adding_since.items()):
            if now - since >= self.catch_up_delay_s:
                request.caught_up_replicas.add(topic_id=topic_id, partition_id=partition_id)
        response = await self.client.broker_heartbeat(request, deadline_s=max(self.heartbeat_interval_s, 0.5))
        if response.error_code in (errors_pb2.STALE_BROKER_EPOCH, errors_pb2.BROKER_ID_NOT_REGISTERED):
            # The controller lost or replaced our registration (e.g. after an unregister): register again.
            state.broker_epoch = -1
            return
        if response.error_code != errors_pb2.NONE:
            log.warning("heartbeat refused", broker_id=state.spec.broker_id, message=response.error_message)
            return
        if state.shutting_down and response.should_shut_down:
            state.fenced = True
            state.shut_down = True
            state.failed = True
            state.resumed.clear()
            state.adding_since.clear()
            state.went_down(time.monotonic())
            log.info("controlled shutdown complete: broker stopped", broker_id=state.spec.broker_id)
            return
        if response.is_fenced:
            state.went_down(time.monotonic())
        elif state.up_since is None:
            state.up_since = time.monotonic()
            state.down_since = None
        state.fenced = response.is_fenced
        state.heartbeats += 1
        state.last_heartbeat_monotonic = time.monotonic()
        state.caught_up_reported += len(request.caught_up_replicas)
        # What the controller still lists is still being copied; anything else is done or cancelled.
        listed = {(bytes(a.topic_id), a.partition_id) for a in response.adding_replicas}
        state.adding_since = {key: state.adding_since.get(key, now) for key in listed}

    # -- partition leaders --------------------------------------------------------------------------
    async def _run_partition_leaders(self) -> None:
        last_check = time.monotonic()
        while True:
            await asyncio.sleep(self.isr_check_interval_s)
            now = time.monotonic()
            # A check reads every partition (a node answers it from its whole image): only while
            # an ISR change may be due, and otherwise once per replica lag time as a safety net
            # (Kafka's leaders also recheck their ISRs periodically).
            if not self.isr_change_possible(now) and now - last_check < self.replica_lag_time_max_ms / 1000:
                continue
            last_check = now
            try:
                await self.check_isrs()
            except ClientError as exc:
                log.debug("ISR check skipped", error=str(exc))

    def isr_change_possible(self, now: float) -> bool:
        """Whether a broker came up recently enough to be due to join ISRs (within the catch-up
        delay, plus a few checks to get the change through), or went down recently enough to be
        due to leave them (within the replica lag time, plus the same margin)."""
        margin = 3 * self.isr_check_interval_s
        for state in self.states.values():
            if state.up_since is not None and now - state.up_since <= self.catch_up_delay_s + margin:
                return True
            if state.down_since is not None and now - state.down_since <= self.replica_lag_time_max_ms / 1000 + margin:
                return True
        return False

    async def check_isrs(self) -> int:
        """One round of the partition leaders' ISR checks; returns the ISR changes accepted."""
        described = await self.client.describe_topics(stale=True)
        now = time.monotonic()
        now_ms = int(now * 1000)
        states = partition_states(described)
        for state in states:
            for replica in state.replicas:
                self.replica_seen_ms.setdefault((state.topic_id, state.partition, replica), now_ms)
        live = {b: s.liveness() for b, s in self.states.items() if s.broker_epoch >= 0}
        changes = isr_changes(
            states,
            live,
            now_ms,
            catch_up_ms=self.catch_up_delay_ms,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            replica_seen_since_ms=self.replica_seen_ms,
        )
        if not changes:
            return 0
        names = {bytes(t.topic_id): t.name for t in described.topics}
        for change in changes:
            log.info(
                "partition leader asks for an ISR change",
                broker_id=change.state.leader,
                topic=names.get(change.state.topic_id, id_text(change.state.topic_id)),
                partition=change.state.partition,
                leader_epoch=change.state.leader_epoch,
                partition_epoch=change.state.partition_epoch,
                isr=list(change.state.isr),
                new_isr=list(change.new_isr),
            )
        requests = alter_partition_requests(changes, live)
        answers = await asyncio.gather(
            *(
                self.client.alter_partition(r, deadline_s=max(1.0, self.isr_check_interval_s))
                for r in requests.values()
            ),
            return_exceptions=True,
        )
        accepted = 0
        for leader, answer in zip(requests, answers, strict=True):
            self.states[leader].alter_partition_sent += 1
            if isinstance(answer, BaseException):
                if not isinstance(answer, ClientError):
                    raise answer
                log.debug("AlterPartition failed", broker_id=leader, error=str(answer))
                continue
            ok = sum(1 for t in answer.topics for p in t.partitions if p.error_code == errors_pb2.NONE)
            refused = [
                f"{names.get(bytes(t.topic_id), id_text(bytes(t.topic_id)))}-{p.partition_index}: "
                f"{errors_pb2.ErrorCode.Name(p.error_code)}"
                for t in answer.topics
                for p in t.partitions
                if p.error_code != errors_pb2.NONE
            ]
            if answer.error_code != errors_pb2.NONE:
                refused.append(errors_pb2.ErrorCode.Name(answer.error_code))
            if refused:
                # Stale metadata (an epoch moved meanwhile) is normal: the next round recomputes.
                log.info("AlterPartition refused in part", broker_id=leader, refused=refused[:10])
            self.states[leader].isr_changes_accepted += ok
            accepted += ok
        return accepted


FleetContext = grpc.aio.ServicerContext[object, fleet_pb2.FleetStatus]


class FleetServicer(fleet_pb2_grpc.BrokerFleetServiceServicer):
    def __init__(self, fleet: BrokerFleet) -> None:
        self.fleet = fleet

    async def FailBrokers(self, request: fleet_pb2.FleetBrokerIds, context: FleetContext) -> fleet_pb2.FleetStatus:
        try:
            self.fleet.fail(list(request.broker_ids))
        except KeyError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc.args[0]))
        return self.fleet.status()

    async def RecoverBrokers(self, request: fleet_pb2.FleetBrokerIds, context: FleetContext) -> fleet_pb2.FleetStatus:
        try:
            self.fleet.recover(list(request.broker_ids))
        except KeyError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc.args[0]))
        return self.fleet.status()

    async def ShutdownBrokers(self, request: fleet_pb2.FleetBrokerIds, context: FleetContext) -> fleet_pb2.FleetStatus:
        timeout = context.time_remaining()
        try:
            await self.fleet.shutdown(
                list(request.broker_ids), timeout_s=30.0 if timeout is None else max(0.1, timeout - 0.5)
            )
        except KeyError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc.args[0]))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except TimeoutError as exc:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(exc))
        return self.fleet.status()

    async def Status(self, request: fleet_pb2.FleetStatusRequest, context: FleetContext) -> fleet_pb2.FleetStatus:
        return self.fleet.status()


async def start_control_server(listen: str) -> tuple[grpc.aio.Server, str]:
    """A grpc.aio server for the fleet's control service; returns it with its bound address.

    Plaintext even when the fleet reaches the quorum over TLS: it is the simulation's own control
    port (``brokers fail|recover``), bound to loopback by default, not part of a deployment."""
    server = grpc.aio.server(options=grpc_channel_options())
    host, _ = parse_host_port(listen, "the fleet's --listen", any_port=True)
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    return server, join_host_port(host, port)
