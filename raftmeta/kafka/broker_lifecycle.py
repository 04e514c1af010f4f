"""BrokerRegistration (62) and BrokerHeartbeat (63): a real Kafka broker's lifecycle towards its
controller, on the node's Kafka listener.

Both are the gRPC fleet's calls (RegisterBroker, BrokerHeartbeat) through the node's admin path:
the controller's broker rules (raftmeta.controller.brokers) answer, whichever door the broker
came in by. This module only translates fields and refuses what the gRPC request cannot carry,
with the error KRaft's ClusterControlManager gives:

- ``is_migrating_zk_broker``: BROKER_ID_NOT_REGISTERED (KRaft 4 registers no ZooKeeper broker);
- ``log_dirs`` empty (always before v2): INVALID_REGISTRATION (the gRPC RegisterBroker allows
  none, for raftmeta's simulated brokers; a Kafka broker always has one). The controller checks
  the directories themselves (reserved, twice, another broker's: raftmeta/controller/directories.py)
  and keeps them in the broker's RegisterBrokerRecord.

What raftmeta's registration does not keep (its RegisterBrokerRecord has no place for it): the
listeners' security protocols, the features and their ranges and ``previous_broker_epoch``; nor
does a heartbeat's ``cordoned_log_dirs`` (v2) change anything. A heartbeat's ``offline_log_dirs``
(v1+) goes to the controller, which moves leadership and ISR membership off the replicas in them
and drops them from the broker's registration (raftmeta/controller/elections.py,
``offline_dirs_steps``). docs/kafka-protocol.md lists the differences.

A heartbeat carries ``current_metadata_offset``: the controller unfences a fenced broker once it
reaches the offset of the broker's committed registration and answers ``is_caught_up``, as KRaft
does. An answer with an error keeps Kafka's defaults (``is_fenced`` true, ``is_caught_up`` and
``should_shut_down`` false), as KRaft's ControllerApis answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from raftmeta.kafka.context import ApiContext, CallRefused, call
from raftmeta.kafka.framing import Request
from raftmeta.kafka.uuids import uuid_bytes
from raftmeta.v1 import controller_pb2, errors_pb2


def registration_refusal(body: Any) -> int | None:
    """The Kafka error code of a registration the controller must not see, or None."""
    if getattr(body, "is_migrating_zk_broker", False):
        return int(errors_pb2.BROKER_ID_NOT_REGISTERED)
    # Before v2 a registration has no log directories: KRaft 4's metadata versions all assign
    # partitions to directories, so it refuses those as it refuses an empty list.
    if not tuple(getattr(body, "log_dirs", ())):
        return int(ErrorCode.invalid_registration.value)
    return None


def registration_request(body: Any) -> controller_pb2.RegisterBrokerRequest:
    """BrokerRegistration's fields as the controller's RegisterBroker."""
    incarnation: uuid.UUID | None = body.incarnation_id
    request = controller_pb2.RegisterBrokerRequest(
        broker_id=int(body.broker_id),
        incarnation_id=b"" if incarnation is None else incarnation.bytes,
        cluster_id=str(body.cluster_id),
        endpoints=[
            controller_pb2.BrokerEndpointInfo(name=listener.name, host=listener.host, port=int(listener.port))
            for listener in body.listeners
        ],
        log_dirs=[uuid_bytes(d) for d in getattr(body, "log_dirs", ())],
    )
    if body.rack is not None:
        request.rack = body.rack
    return request


async def broker_registration(ctx: ApiContext, request: Request) -> dict[str, Any]:
    refused = registration_refusal(request.body)
    if refused is not None:
        return {"throttle_time": 0, "error_code": refused, "broker_epoch": -1}
    try:
        response: controller_pb2.RegisterBrokerResponse = await call(
            ctx, "RegisterBroker", registration_request(request.body)
        )
    except CallRefused as exc:
        return {"throttle_time": 0, "error_code": exc.error_code, "broker_epoch": -1}
    if response.error_code != errors_pb2.NONE:
        return {"throttle_time": 0, "error_code": int(response.error_code), "broker_epoch": -1}
    return {"throttle_time": 0, "error_code": 0, "broker_epoch": int(response.broker_epoch)}


def heartbeat_request(body: Any) -> controller_pb2.BrokerHeartbeatRequest:
    """BrokerHeartbeat's fields as the controller's: want_shut_down is its controlled shutdown."""
    return controller_pb2.BrokerHeartbeatRequest(
        broker_id=int(body.broker_id),
        broker_epoch=int(body.broker_epoch),
        want_fence=bool(body.want_fence),
        want_shutdown_now=bool(body.want_shut_down),
        current_metadata_offset=int(body.current_metadata_offset),
        # Not in v0: none. kio's None is the zero uuid, which no broker registers (so it is ignored).
        offline_log_dirs=[uuid_bytes(d) for d in getattr(body, "offline_log_dirs", ())],
    )


def _heartbeat_error(error_code: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": error_code,
        "is_caught_up": False,
        "is_fenced": True,
        "should_shut_down": False,
    }


async def broker_heartbeat(ctx: ApiContext, request: Request) -> dict[str, Any]:
    try:
        response: controller_pb2.BrokerHeartbeatResponse = await call(
            ctx, "BrokerHeartbeat", heartbeat_request(request.body)
        )
    except CallRefused as exc:
        return _heartbeat_error(exc.error_code)
    if response.error_code != errors_pb2.NONE:
        return _heartbeat_error(int(response.error_code))
    return {
        "throttle_time": 0,
        "error_code": 0,
        "is_caught_up": response.is_caught_up,
        "is_fenced": response.is_fenced,
        "should_shut_down": response.should_shut_down,
    }
