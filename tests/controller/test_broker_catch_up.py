"""Kafka's unfence rule for brokers that replay the log: a fenced broker whose heartbeat carries
``current_metadata_offset`` is unfenced once that offset reaches the committed offset of its
registration (BrokerHeartbeatManager.calculateNextBrokerState; is_caught_up answers
``currentMetadataOffset >= registerBrokerRecordOffset``)."""

from __future__ import annotations

from placement.rng import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.brokers import RegistrationOffset
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import CounterIds, incarnation

IDS, RANDOM = CounterIds(), JavaRandom(1)


def _register(controller: Controller, broker_id: int, generation: int = 1, now_ms: int = 0) -> int:
    handled = controller.handle(
        "RegisterBroker",
        controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation(broker_id, generation)),
        now_ms,
        IDS,
        RANDOM,
    )
    assert handled.response.error_code == 0  # type: ignore[union-attr]
    return int(handled.response.broker_epoch)  # type: ignore[union-attr]


def _fenced(controller: Controller, broker_id: int) -> bool:
    return controller.committed_image.brokers[broker_id].fenced


def _beat(
    controller: Controller, broker_id: int, epoch: int, offset: int | None
) -> controller_pb2.BrokerHeartbeatResponse:
    request = controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch)
    if offset is not None:
        request.current_metadata_offset = offset
    handled = controller.handle("BrokerHeartbeat", request, 0, IDS, RANDOM)
    if handled.records:
        controller.commit(1, controller.committed_offset + len(handled.records))
    response: controller_pb2.BrokerHeartbeatResponse = handled.response  # type: ignore[assignment]
    return response


def test_a_fenced_broker_is_unfenced_once_its_offset_reaches_its_registration() -> None:
    controller = Controller(committed_offset=9)
    epoch = _register(controller, 1)
    controller.commit(1, 14)  # the registration's batch ends at offset 14
    assert controller.registrations[1] == RegistrationOffset(epoch, 14)
    behind = _beat(controller, 1, epoch, 13)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert _fenced(controller, 1)
    caught_up = _beat(controller, 1, epoch, 14)
    assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
    assert not _fenced(controller, 1)
    # Once unfenced, the offset no longer matters (Kafka's UNFENCED state ignores it).
    assert _beat(controller, 1, epoch, 0).is_fenced is False


def test_a_registration_not_committed_yet_is_not_caught_up_with() -> None:
    controller = Controller()
    epoch = _register(controller, 1)
    pending = _beat(controller, 1, epoch, 1_000)
    assert (pending.is_caught_up, pending.is_fenced) == (False, True)


def test_a_new_incarnation_must_catch_up_with_its_own_registration() -> None:
    controller = Controller()
    first = _register(controller, 1)
    controller.commit(1, 0)
    assert _beat(controller, 1, first, 0).is_fenced is False
    fenced = _beat_want_fence(controller, 1, first)
    assert fenced.is_fenced
    # Past the old incarnation's session (9 s since its last heartbeat).
    second = _register(controller, 1, generation=2, now_ms=9_001)
    controller.commit(1, 20)
    assert controller.registrations[1] == RegistrationOffset(second, 20)
    assert _beat(controller, 1, second, 19).is_fenced is True
    assert _beat(controller, 1, second, 20).is_fenced is False


def _beat_want_fence(controller: Controller, broker_id: int, epoch: int) -> controller_pb2.BrokerHeartbeatResponse:
    handled = controller.handle(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, want_fence=True),
        0,
        IDS,
        RANDOM,
    )
    controller.commit(1, controller.committed_offset + max(1, len(handled.records)))
    response: controller_pb2.BrokerHeartbeatResponse = handled.response  # type: ignore[assignment]
    return response


def test_without_an_offset_the_first_heartbeat_unfences_as_for_the_simulated_fleet() -> None:
    controller = Controller()
    epoch = _register(controller, 1)
    response = _beat(controller, 1, epoch, None)
    assert (response.is_caught_up, response.is_fenced) == (True, False)


def test_followers_and_snapshots_know_where_brokers_registered() -> None:
    leader = Controller()
    registered = leader.handle(
        "RegisterBroker",
        controller_pb2.RegisterBrokerRequest(broker_id=7, incarnation_id=incarnation(7)),
        0,
        IDS,
        RANDOM,
    )
    leader.commit(1, 3)
    follower = Controller()
    follower.apply_committed(registered.records, 3)
    assert follower.registrations == leader.registrations == {7: RegistrationOffset(1, 3)}
    offset, records = leader.snapshot()
    restored = Controller.from_snapshot(records, offset)
    assert restored.registrations == {7: RegistrationOffset(1, 3)}
    unregistered = leader.handle(
        "UnregisterBroker", controller_pb2.UnregisterBrokerRequest(broker_id=7), 0, IDS, RANDOM
    )
    leader.commit(1, 3 + len(unregistered.records))
    assert leader.registrations == {}


def test_a_new_incarnation_waits_for_the_old_ones_session_even_when_fenced() -> None:
    """Kafka 4's BrokerHeartbeatTracker: a session is alive while heartbeats come within the
    session timeout (9 s here), fenced or not; a restart right after a controlled shutdown
    registers once it has expired."""
    controller = Controller()
    first = _register(controller, 1)
    controller.commit(1, 0)
    assert _beat(controller, 1, first, 0).is_fenced is False
    shut_down = controller.handle(
        "BrokerHeartbeat",
        controller_pb2.BrokerHeartbeatRequest(broker_id=1, broker_epoch=first, want_shutdown_now=True),
        1_000,
        IDS,
        RANDOM,
    )
    controller.commit(1, controller.committed_offset + len(shut_down.records))
    assert controller.committed_image.brokers[1].fenced
    restarted = controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1, 2))
    refused = controller.handle("RegisterBroker", restarted, 10_000, IDS, RANDOM)
    assert refused.response.error_code == errors_pb2.DUPLICATE_BROKER_REGISTRATION  # type: ignore[union-attr]
    assert refused.records == ()
    accepted = controller.handle("RegisterBroker", restarted, 10_001, IDS, RANDOM)
    assert accepted.response.error_code == errors_pb2.NONE  # type: ignore[union-attr]
    assert accepted.response.broker_epoch > first  # type: ignore[union-attr]
