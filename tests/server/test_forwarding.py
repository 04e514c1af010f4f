"""A follower's forwarded call and leadership changes (ControllerServicer._finished_while_leading)."""

from __future__ import annotations

import asyncio
import gc
from types import SimpleNamespace
from typing import Any, cast

import grpc
import pytest

from raftmeta.server.node import Node
from raftmeta.server.services import AdminCallError, ControllerServicer, safe_to_send_again
from raftmeta.v1 import controller_pb2


def servicer(leader_id: int) -> tuple[ControllerServicer, Any]:
    node = SimpleNamespace(node_id=1, leader_changed=asyncio.Event(), core=SimpleNamespace(leader_id=leader_id))
    return ControllerServicer(cast(Node, node)), node


def change_leader(node: Any, leader_id: int) -> None:
    node.core.leader_id = leader_id
    node.leader_changed.set()
    node.leader_changed = asyncio.Event()


@pytest.mark.asyncio
async def test_an_answer_before_any_change_is_the_answer() -> None:
    service, _node = servicer(leader_id=2)

    async def answered() -> str:
        return "answer"

    forward = asyncio.ensure_future(answered())
    assert await service._finished_while_leading(forward, 2)
    assert forward.result() == "answer"


@pytest.mark.asyncio
async def test_a_change_of_epoch_with_the_same_leader_keeps_waiting() -> None:
    service, node = servicer(leader_id=2)
    release = asyncio.Event()

    async def slow() -> str:
        await release.wait()
        return "answer"

    forward = asyncio.ensure_future(slow())
    waiting = asyncio.ensure_future(service._finished_while_leading(forward, 2))
    await asyncio.sleep(0)
    change_leader(node, 2)
    await asyncio.sleep(0)
    assert not waiting.done()
    release.set()
    assert await waiting


@pytest.mark.asyncio
async def test_a_new_leader_abandons_the_call_and_its_late_error_is_not_logged() -> None:
    """The forwarded gRPC call may end with its own error even after it was cancelled: nobody reads
    it, and asyncio must not report it as never retrieved."""
    service, node = servicer(leader_id=2)
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: reported.append(context))

    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            raise AdminCallError(grpc.StatusCode.UNAVAILABLE, "connection refused") from None
        return "never"

    forward = asyncio.ensure_future(stubborn())
    waiting = asyncio.ensure_future(service._finished_while_leading(forward, 2))
    await asyncio.sleep(0)
    change_leader(node, -1)
    assert await waiting is False
    await asyncio.sleep(0)
    assert forward.done() and not forward.cancelled()
    del forward, waiting
    gc.collect()
    assert reported == []


def test_what_may_be_sent_to_the_next_leader() -> None:
    create = controller_pb2.CreateTopicsRequest(topics=[controller_pb2.CreatableTopic(name="t", num_partitions=1)])
    assert not safe_to_send_again("CreateTopics", create), "no request id: a second attempt may create it twice"
    create.request_id = "r-1"
    assert safe_to_send_again("CreateTopics", create)
    assert safe_to_send_again("DescribeTopics", controller_pb2.DescribeTopicsRequest())
    assert safe_to_send_again("DescribeQuorum", controller_pb2.DescribeQuorumRequest())
    assert safe_to_send_again("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=1))
    assert not safe_to_send_again("AddRaftVoter", controller_pb2.AddRaftVoterRequest(voter_id=4))
