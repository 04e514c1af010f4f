"""Broker lifecycle handlers: RegisterBroker, BrokerHeartbeat, DescribeCluster, and the session
fencing that ``Controller.tick`` drives (Kafka's ``ClusterControlManager`` + heartbeat manager).

- A broker registers fenced. Re-registering with the same incarnation id and the same details is
  idempotent (no record, the same epoch). A new incarnation while the old one's session is alive
  is DUPLICATE_BROKER_REGISTRATION: while it is unfenced, or (Kafka 4's BrokerHeartbeatTracker)
  while its last heartbeat is within the session timeout, fenced or not -- a broker restarted
  right after its controlled shutdown registers once the old session has expired, as on KRaft.
  Then the new incarnation replaces the old one.
- **Broker epoch rule.** Kafka uses the offset of the RegisterBrokerRecord, which a handler cannot
  know. raftmeta uses 1 + the highest epoch of any registered broker: deterministic, rising with
  every registration, and distinct across brokers, so a stale incarnation's epoch never matches.
  (A broker removed by UnregisterBrokerRecord takes its epoch with it; that is the one case where
  an epoch number could be reused, for a different broker or incarnation.)
- A heartbeat with the right epoch unfences a fenced broker (UnfenceBrokerRecord, then leaderless
  partitions elect again), or fences an unfenced one that asks to be (``want_fence``). A heartbeat
  that carries ``current_metadata_offset`` (a real broker's: it replays the log) unfences only once
  that offset reaches the committed offset of the broker's registration (Kafka's
  BrokerHeartbeatManager: the broker has caught up with the log; ``is_caught_up`` says so); the
  simulated fleet sends none and is unfenced by its first heartbeat. The time of
  the last heartbeat is soft state the controller object keeps, never logged.
- **Controlled shutdown** (``want_shutdown_now``, Kafka's): the broker leaves every leadership and
  every ISR it is not the last member of, then is fenced -- one batch, so no election can pick it
  in between (Kafka marks it ``in_controlled_shutdown`` for the same reason, because its broker
  waits for the moves across several heartbeats). The answer says ``should_shut_down``.
- **UnregisterBroker** (Kafka's): the broker leaves every ISR and leadership, then an
  UnregisterBrokerRecord removes it; BROKER_ID_NOT_REGISTERED for an unknown id.
- Reassignment catch-up (:mod:`raftmeta.controller.reassign`): a heartbeat that does not ask to be
  fenced may report ``caught_up_replicas``; each that still applies adds the broker to that
  partition's ISR (and may complete the move), after the unfence records of the same heartbeat.
  Every successful answer lists the partitions the broker is still adding (``adding_replicas``),
  as of the image after this heartbeat's records.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from placement.rng import RandomSource
from raftmeta.controller.directories import malformed_dir, registration_problem
from raftmeta.controller.elections import fence_steps, offline_dirs_steps, unfence_steps, unregister_steps
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.reassign import adding_replicas_of, caught_up_records
from raftmeta.controller.result import (
    DEFAULT_CONFIG,
    ControllerConfig,
    ControllerResult,
    TopicIdSource,
    Work,
)
from raftmeta.controller.work import Steps, TurnBudget, start
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2


def next_broker_epoch(image: MetadataImage) -> int:
    return 1 + max((b.epoch for b in image.brokers.values()), default=0)


def _register_error(code: int, message: str) -> ControllerResult[controller_pb2.RegisterBrokerResponse]:
    return ControllerResult((), controller_pb2.RegisterBrokerResponse(error_code=code, error_message=message))  # type: ignore[arg-type]


def register_broker(
    image: MetadataImage,
    request: controller_pb2.RegisterBrokerRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
    live_sessions: Collection[int] = frozenset(),
) -> ControllerResult[controller_pb2.RegisterBrokerResponse]:
    """``live_sessions``: the brokers whose last heartbeat is within the session timeout (the
    Controller's soft state; :func:`live_sessions`)."""
    del now_ms, ids, random
    if request.cluster_id and config.cluster_id and request.cluster_id != config.cluster_id:
        return _register_error(
            errors_pb2.INCONSISTENT_CLUSTER_ID,
            f"Expected cluster ID {config.cluster_id}, but got cluster ID {request.cluster_id}",
        )
    if request.broker_id < 0:
        return _register_error(errors_pb2.INVALID_REQUEST, f"broker_id must be >= 0, got {request.broker_id}.")
    if len(request.incarnation_id) != 16 or request.incarnation_id == bytes(16):
        return _register_error(errors_pb2.INVALID_REQUEST, "incarnation_id must be 16 non-zero bytes (a uuid).")
    rack = request.rack if request.HasField("rack") else None
    pool = request.pool if request.HasField("pool") else None
    endpoints = [records_pb2.BrokerEndpoint(name=e.name, host=e.host, port=e.port) for e in request.endpoints]
    existing = image.brokers.get(request.broker_id)
    if existing is not None:
        if existing.incarnation_id == request.incarnation_id:
            same = (existing.rack, existing.pool, existing.endpoints, existing.log_dirs) == (
                rack,
                pool,
                tuple((e.name, e.host, e.port) for e in endpoints),
                tuple(request.log_dirs),
            )
            if not same:
                return _register_error(
                    errors_pb2.INVALID_REQUEST,
                    f"Broker {request.broker_id} is already registered with this incarnation id but different "
                    "rack, pool, endpoints or log directories; a changed broker must register with a new "
                    "incarnation id.",
                )
            return ControllerResult((), controller_pb2.RegisterBrokerResponse(broker_epoch=existing.epoch))
        if not existing.fenced or existing.id in live_sessions:
            return _register_error(
                errors_pb2.DUPLICATE_BROKER_REGISTRATION, "Another broker is registered with that broker id."
            )
    problem = registration_problem(image, request.broker_id, request.log_dirs)
    if problem is not None:
        return _register_error(errors_pb2.INVALID_REGISTRATION, problem)
    epoch = next_broker_epoch(image)
    record = records_pb2.RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=epoch,
        rack=rack,
        pool=pool,
        endpoints=endpoints,
        fenced=True,
        log_dirs=request.log_dirs,
    )
    return ControllerResult(
        (records_pb2.MetadataRecord(register_broker=record),),
        controller_pb2.RegisterBrokerResponse(broker_epoch=epoch),
    )


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> ApiError | None:
    """Kafka's ``checkBrokerEpoch`` (STALE_BROKER_EPOCH with Kafka's messages)."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return ApiError(errors_pb2.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
    if broker.epoch != broker_epoch:
        return ApiError(
            errors_pb2.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.epoch}, but got broker epoch {broker_epoch}"
        )
    return None


class RegistrationOffset(NamedTuple):
    """Where a broker's registration was committed: its broker epoch and the last offset of the
    log batch that holds its RegisterBrokerRecord (a broker that applied that batch saw it)."""

    broker_epoch: int
    offset: int


def registration_offsets_after(
    before: MetadataImage, after: MetadataImage, last_offset: int, known: dict[int, RegistrationOffset]
) -> None:
    """Record in ``known`` the brokers that ``after`` (committed at ``last_offset``) registers
    anew: a broker epoch changes only with a RegisterBrokerRecord. A broker gone from ``after``
    is forgotten."""
    if after.brokers is before.brokers:
        return
    for broker in after.brokers.values():
        previous = before.brokers.get(broker.id)
        if previous is None or previous.epoch != broker.epoch:
            known[broker.id] = RegistrationOffset(broker.epoch, last_offset)
    for broker_id in [b for b in known if b not in after.brokers]:
        del known[broker_id]


def is_caught_up(
    request: controller_pb2.BrokerHeartbeatRequest, registrations: Mapping[int, RegistrationOffset]
) -> bool:
    """Kafka's ``currentMetadataOffset >= registerBrokerRecordOffset``; a heartbeat without an
    offset (the simulated fleet) counts as caught up, and a registration not committed yet (or
    an earlier incarnation's) is not caught up with."""
    if not request.HasField("current_metadata_offset"):
        return True
    registered = registrations.get(request.broker_id)
    return (
        registered is not None
        and registered.broker_epoch == request.broker_epoch
        and request.current_metadata_offset >= registered.offset
    )


def broker_heartbeat(
    image: MetadataImage,
    request: controller_pb2.BrokerHeartbeatRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
    registrations: Mapping[int, RegistrationOffset] | None = None,
) -> ControllerResult[controller_pb2.BrokerHeartbeatResponse]:
    """``registrations``: where each broker's registration was committed (the Controller keeps
    them as it commits; :func:`registration_offsets_after`)."""
    del now_ms, ids, random
    response = controller_pb2.BrokerHeartbeatResponse(session_timeout_ms=config.session_timeout_ms)
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error is not None:
        response.error_code = error.code  # type: ignore[assignment]
        response.error_message = error.message
        return ControllerResult((), response)
    malformed = malformed_dir("offline_log_dirs", request.offline_log_dirs)
    if malformed is not None:
        response.error_code = errors_pb2.INVALID_REQUEST
        response.error_message = malformed
        return ControllerResult((), response)
    response.is_caught_up = is_caught_up(request, registrations or {})
    return start(_heartbeat(image, request, response, config), response)


def _heartbeat(
    image: MetadataImage,
    request: controller_pb2.BrokerHeartbeatRequest,
    response: controller_pb2.BrokerHeartbeatResponse,
    config: ControllerConfig,
) -> Work[controller_pb2.BrokerHeartbeatResponse]:
    """A heartbeat of the right epoch; fencing and unfencing may take several turns (work.py)."""
    broker = image.brokers[request.broker_id]
    budget = TurnBudget.of(config)
    unclean = config.unclean_leader_election_enable
    records: list[records_pb2.MetadataRecord] = []
    if request.want_shutdown_now:
        if not broker.fenced:
            image, records = yield from fence_steps(image, broker.id, unclean, budget)
        response.is_fenced = True
        response.should_shut_down = True
        _, records = yield from _offline_dirs(image, records, request, unclean, budget)
        return ControllerResult(tuple(records), response)
    if request.want_fence and not broker.fenced:
        image, records = yield from fence_steps(image, broker.id, unclean, budget)
        response.is_fenced = True
    elif not request.want_fence and broker.fenced:
        if response.is_caught_up:
            image, records = yield from unfence_steps(image, broker.id, unclean, budget)
        # Not caught up with its registration: it stays fenced until a later heartbeat is.
        response.is_fenced = not response.is_caught_up
    else:
        response.is_fenced = broker.fenced
    image, records = yield from _offline_dirs(image, records, request, unclean, budget)
    if not request.want_fence and (request.caught_up_replicas or image.reassigning):
        # ``image`` is the working image the last turn began with.
        after = image.replay_all(records) if records else image
        caught_up = caught_up_records(after, broker.id, request.caught_up_replicas)
        if caught_up:
            records.extend(caught_up)
            after = after.replay_all(caught_up)
        response.adding_replicas.extend(adding_replicas_of(after, broker.id))
    return ControllerResult(tuple(records), response)


def _offline_dirs(
    image: MetadataImage,
    records: list[records_pb2.MetadataRecord],
    request: controller_pb2.BrokerHeartbeatRequest,
    unclean: bool,
    budget: TurnBudget,
) -> Steps:
    """The heartbeat's offline log directories acted on after its fencing records, as Kafka's
    ``processBrokerHeartbeat`` calls ``handleDirectoriesOffline`` after the broker's state change.
    ``image``: the working image the turn began with, before ``records``."""
    if not request.offline_log_dirs:  # the simulated fleet's heartbeats: no work at all
        return image, records
    return (yield from offline_dirs_steps(image, request.broker_id, request.offline_log_dirs, unclean, budget, records))


def unregister_broker(
    image: MetadataImage,
    request: controller_pb2.UnregisterBrokerRequest,
    now_ms: int,
    ids: TopicIdSource,
    random: RandomSource,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.UnregisterBrokerResponse]:
    del now_ms, ids, random
    if request.broker_id not in image.brokers:
        return ControllerResult(
            (),
            controller_pb2.UnregisterBrokerResponse(
                error_code=errors_pb2.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker ID {request.broker_id} is not currently registered",
            ),
        )
    return start(_unregister(image, request.broker_id, config), controller_pb2.UnregisterBrokerResponse())


def _unregister(
    image: MetadataImage, broker_id: int, config: ControllerConfig
) -> Work[controller_pb2.UnregisterBrokerResponse]:
    budget = TurnBudget.of(config)
    _, records = yield from unregister_steps(image, broker_id, config.unclean_leader_election_enable, budget)
    return ControllerResult(tuple(records), controller_pb2.UnregisterBrokerResponse())


def describe_cluster(
    image: MetadataImage,
    request: controller_pb2.DescribeClusterRequest,
    now_ms: int = 0,
    ids: TopicIdSource | None = None,
    random: RandomSource | None = None,
    config: ControllerConfig = DEFAULT_CONFIG,
) -> ControllerResult[controller_pb2.DescribeClusterResponse]:
    del request, now_ms, ids, random
    response = controller_pb2.DescribeClusterResponse(cluster_id=config.cluster_id, controller_id=config.node_id)
    for broker in sorted(image.brokers.values(), key=lambda b: b.id):
        response.brokers.add(
            broker_id=broker.id,
            rack=broker.rack,
            pool=broker.pool,
            fenced=broker.fenced,
            broker_epoch=broker.epoch,
            endpoints=[
                controller_pb2.BrokerEndpointInfo(name=e.name, host=e.host, port=e.port) for e in broker.endpoints
            ],
        )
    return ControllerResult((), response)


def live_sessions(last_contact_ms: Mapping[int, int], now_ms: int, session_timeout_ms: int) -> frozenset[int]:
    """The brokers heard from within the session timeout, fenced or not."""
    return frozenset(b for b, contact in last_contact_ms.items() if now_ms - contact <= session_timeout_ms)


def stale_brokers(
    image: MetadataImage, last_contact_ms: dict[int, int], now_ms: int, session_timeout_ms: int
) -> list[int]:
    """Unfenced brokers whose last heartbeat is older than the session timeout, by id."""
    return sorted(
        b.id
        for b in image.brokers.values()
        if not b.fenced and now_ms - last_contact_ms.get(b.id, now_ms) > session_timeout_ms
    )
