"""The controller object under random driver schedules: committed image = replay of the committed
log, working image = committed + pending, and every request is answered exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.rng import JavaRandom
from raftmeta.controller import METHODS, Controller, MetadataImage
from raftmeta.v1 import controller_pb2, records_pb2
from tests.controller.helpers import CounterIds, incarnation

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["create", "grow", "delete", "register", "beat", "commit", "renounce", "tick", "describe"]),
        st.integers(0, 4),
        st.booleans(),
    ),
    min_size=1,
    max_size=50,
)


def request_for(kind: str, a: int, flag: bool, controller: Controller) -> tuple[str, Any] | None:
    request_id = f"r{a}" if flag else ""
    if kind == "create":
        topic = controller_pb2.CreatableTopic(name=f"t{a}", num_partitions=a + 1, replication_factor=1 + a % 2)
        return "CreateTopics", controller_pb2.CreateTopicsRequest(topics=[topic], request_id=request_id)
    if kind == "grow":
        grow = controller_pb2.CreatePartitionsTopic(name=f"t{a}", count=a + 3)
        return "CreatePartitions", controller_pb2.CreatePartitionsRequest(
            topics=[grow], request_id=f"g{a}" if flag else ""
        )
    if kind == "delete":
        return "DeleteTopics", controller_pb2.DeleteTopicsRequest(
            topic_names=[f"t{a}"], request_id=f"d{a}" if flag else ""
        )
    if kind == "register":
        return "RegisterBroker", controller_pb2.RegisterBrokerRequest(
            broker_id=a, incarnation_id=incarnation(a, 2 if flag else 1), rack=f"r{a % 2}"
        )
    if kind == "beat":
        broker = controller.image.brokers.get(a)
        epoch = broker.epoch if broker is not None else 0
        return "BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(
            broker_id=a, broker_epoch=epoch, want_fence=flag and a == 4
        )
    if kind == "describe":
        return "DescribeTopics", controller_pb2.DescribeTopicsRequest()
    return None


@settings(max_examples=40, deadline=None)
@given(actions=ACTIONS)
def test_random_driver_schedules(actions: list[tuple[str, int, bool]]) -> None:
    controller = Controller(ids=CounterIds(), random=JavaRandom(11))
    committed_log: list[records_pb2.MetadataRecord] = []
    pending: list[tuple[int, Sequence[records_pb2.MetadataRecord]]] = []  # (last offset, records)
    offset = -1
    now_ms = 0
    # Requests not answered at once: (the last offset of the batch their answer waits for, the
    # answer), as the QuorumController keeps them.
    waiting: list[tuple[int, Any]] = []
    answered: list[Any] = []

    for kind, a, flag in actions:
        now_ms += 1000
        if kind == "commit":
            if pending:
                index = min(a, len(pending) - 1)
                upto = pending[index][0]
                controller.commit(index + 1, upto)
                answered.extend(response for last, response in waiting if last <= upto)
                waiting = [(last, response) for last, response in waiting if last > upto]
                while pending and pending[0][0] <= upto:
                    committed_log.extend(pending.pop(0)[1])
        elif kind == "renounce":
            controller.renounce()
            waiting.clear()  # the QuorumController answers them NOT_CONTROLLER
            pending.clear()
            offset = controller.committed_offset  # the log continues after the committed prefix
        elif kind == "tick":
            handled = controller.tick(now_ms * 5)
            if handled is not None:
                assert handled.response is None, "a timer's batch answers nobody"
                offset += len(handled.records)
                pending.append((offset, handled.records))
        else:
            spec = request_for(kind, a, flag, controller)
            assert spec is not None
            handled = controller.handle(spec[0], spec[1], now_ms)
            if handled.records:
                offset += len(handled.records)
                pending.append((offset, handled.records))
            if handled.done:
                assert not pending or not METHODS[spec[0]].mutating, "a write answered at once overtakes no batch"
                answered.append(handled.response)
            elif handled.method != "Work":
                assert pending, "an answer that waits waits for a pending batch"
                waiting.append((pending[-1][0], handled.response))
            assert controller.pending_count == len(pending)
        # The invariants of the driver contract, after every step.
        assert controller.committed_image == MetadataImage.empty().replay_all(committed_log)
        expected = MetadataImage.empty().replay_all(committed_log + [r for _, batch in pending for r in batch])
        assert controller.image == expected
    for response in answered:
        assert response is not None
    controller.renounce()
    assert controller.image == controller.committed_image
