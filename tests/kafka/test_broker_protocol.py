"""The controller side of KRaft's broker protocol on the Kafka listener: BrokerRegistration (62),
BrokerHeartbeat (63), AlterPartition (56) and AllocateProducerIds (67) translated to the
controller's broker calls and back, through the real decode → handler → encode path with a fake
admin path for the node. (What the controller answers is golden-tested against a real KRaft
controller: tests/kraft/.)"""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from kio.schema.errors import ErrorCode

from raftmeta.api.rpc_errors import error_metadata
from raftmeta.server.services import AdminCallError
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.kafka.fakes import full_admin
from tests.kafka.helpers import FakeAdmin, decode_response, framed, request_bytes
from tests.kafka.samples import REQUESTS, TOPIC_ID
from tests.kafka.test_apis import ask

DIRECTORY = uuid.UUID(int=0x5678 << 64)


def _registration(**changes: Any) -> dict[str, Any]:
    return {**REQUESTS[62], **changes}


def test_registration_becomes_the_controllers_register_broker() -> None:
    admin = full_admin()
    response = ask(admin, 62, 4, REQUESTS[62])
    assert (response.error_code, response.broker_epoch) == (ErrorCode.none, 10)
    assert admin.methods() == ["RegisterBroker"]
    sent = admin.sent(0)
    assert (sent.broker_id, sent.cluster_id, sent.rack) == (1, "test-cluster-id-000000", "r1")
    assert sent.incarnation_id == uuid.UUID(int=0x1234).bytes
    assert [(e.name, e.host, e.port) for e in sent.endpoints] == [("PLAINTEXT", "127.0.0.1", 9092)]


def test_registration_without_a_rack_has_none() -> None:
    admin = full_admin()
    ask(admin, 62, 4, _registration(rack=None))
    assert not admin.sent(0).HasField("rack")


@pytest.mark.parametrize(
    ("changes", "version"),
    [
        ({"is_migrating_zk_broker": True}, 4),
        ({"log_dirs": []}, 4),
        ({}, 1),  # before v2: no log directories at all
    ],
)
def test_registrations_kraft_refuses_never_reach_the_controller(changes: dict[str, Any], version: int) -> None:
    admin = full_admin()
    response = ask(admin, 62, version, _registration(**changes))
    expected = (
        ErrorCode.broker_id_not_registered if changes.get("is_migrating_zk_broker") else ErrorCode.invalid_registration
    )
    assert (response.error_code, response.broker_epoch) == (expected, -1)
    assert admin.calls == []


def test_the_lowest_unreserved_directory_id_is_accepted() -> None:
    admin = full_admin()
    assert ask(admin, 62, 4, _registration(log_dirs=[uuid.UUID(int=100)])).error_code == ErrorCode.none


def test_the_registrations_log_directories_go_to_the_controller() -> None:
    """Reserved, repeated or another broker's directories are the controller's to refuse
    (raftmeta.controller.directories; tests/controller/test_directories.py): it keeps them."""
    admin = full_admin()
    ask(admin, 62, 4, _registration(log_dirs=[DIRECTORY, uuid.UUID(int=1)]))
    assert list(admin.sent(0).log_dirs) == [DIRECTORY.bytes, uuid.UUID(int=1).bytes]


def test_a_registration_the_controller_refuses_answers_its_code() -> None:
    admin = FakeAdmin()
    admin.answers["RegisterBroker"] = lambda r: controller_pb2.RegisterBrokerResponse(
        error_code=errors_pb2.INVALID_REGISTRATION, error_message="Reserved directory ID in request"
    )
    response = ask(admin, 62, 4, _registration(log_dirs=[uuid.UUID(int=1)]))
    assert (response.error_code, response.broker_epoch) == (ErrorCode.invalid_registration, -1)


def test_assign_replicas_to_dirs_becomes_the_controllers_and_answers_per_partition() -> None:
    admin = full_admin()
    admin.answers["AssignReplicasToDirs"] = lambda r: controller_pb2.AssignReplicasToDirsResponse(
        directories=[
            controller_pb2.AssignReplicasDirectoryResult(
                id=r.directories[0].id,
                topics=[
                    controller_pb2.AssignReplicasTopicResult(
                        topic_id=TOPIC_ID.bytes,
                        partitions=[
                            controller_pb2.AssignReplicasPartitionResult(partition_index=0),
                            controller_pb2.AssignReplicasPartitionResult(
                                partition_index=1, error_code=errors_pb2.NOT_LEADER_OR_FOLLOWER, error_message="no"
                            ),
                        ],
                    )
                ],
            )
        ]
    )
    response = ask(admin, 73, 0, REQUESTS[73])
    sent = admin.sent(0)
    assert (sent.broker_id, sent.broker_epoch) == (1, 10)
    assert [(bytes(d.id), [(bytes(t.topic_id), list(t.partitions)) for t in d.topics]) for d in sent.directories] == [
        (DIRECTORY.bytes, [(TOPIC_ID.bytes, [0, 1])])
    ]
    assert response.error_code == ErrorCode.none
    (directory,) = response.directories
    assert directory.id_ == DIRECTORY
    (topic,) = directory.topics
    assert topic.topic_id == TOPIC_ID
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (0, ErrorCode.none),
        (1, ErrorCode.not_leader_or_follower),
    ]


def test_a_stale_assign_replicas_to_dirs_answers_the_top_level_code_only() -> None:
    admin = FakeAdmin()
    admin.answers["AssignReplicasToDirs"] = lambda r: controller_pb2.AssignReplicasToDirsResponse(
        error_code=errors_pb2.STALE_BROKER_EPOCH, error_message="Expected broker epoch 11, but got broker epoch 10"
    )
    response = ask(admin, 73, 0, REQUESTS[73])
    assert (response.error_code, response.directories) == (ErrorCode.stale_broker_epoch, ())


def test_a_refused_registration_has_no_epoch() -> None:
    admin = FakeAdmin()
    admin.answers["RegisterBroker"] = lambda r: controller_pb2.RegisterBrokerResponse(
        error_code=errors_pb2.DUPLICATE_BROKER_REGISTRATION, error_message="Another broker is registered"
    )
    response = ask(admin, 62, 4, REQUESTS[62])
    assert (response.error_code, response.broker_epoch) == (ErrorCode.duplicate_broker_registration, -1)


def test_heartbeat_carries_the_offset_and_shutdown_and_answers_kafkas_fields() -> None:
    admin = FakeAdmin()
    admin.answers["BrokerHeartbeat"] = lambda r: controller_pb2.BrokerHeartbeatResponse(
        is_caught_up=True, is_fenced=True, should_shut_down=True
    )
    values = {**REQUESTS[63], "want_shut_down": True}
    response = ask(admin, 63, 1, values)
    assert (response.error_code, response.is_caught_up, response.is_fenced, response.should_shut_down) == (
        ErrorCode.none, True, True, True
    )  # fmt: skip
    sent = admin.sent(0)
    assert (sent.broker_id, sent.broker_epoch, sent.current_metadata_offset) == (1, 10, 42)
    assert (sent.want_fence, sent.want_shutdown_now) == (False, True)


@pytest.mark.parametrize("version", [1, 2])
def test_heartbeat_passes_its_offline_log_dirs_to_the_controller(version: int) -> None:
    """KIP-858: a broker reports its failed directories in every heartbeat from v1; the controller
    acts on them (tests/controller/test_offline_dirs.py). kio's None is Kafka's zero uuid."""
    admin = FakeAdmin()
    admin.answers["BrokerHeartbeat"] = lambda r: controller_pb2.BrokerHeartbeatResponse()
    ask(admin, 63, version, {**REQUESTS[63], "offline_log_dirs": [DIRECTORY, None]})
    assert list(admin.sent(0).offline_log_dirs) == [DIRECTORY.bytes, bytes(16)]


def test_a_heartbeat_before_v1_has_no_offline_log_dirs() -> None:
    admin = FakeAdmin()
    admin.answers["BrokerHeartbeat"] = lambda r: controller_pb2.BrokerHeartbeatResponse()
    values = {k: v for k, v in REQUESTS[63].items() if k not in ("offline_log_dirs", "cordoned_log_dirs")}
    ask(admin, 63, 0, values)
    assert list(admin.sent(0).offline_log_dirs) == []


@pytest.mark.parametrize("refused_by", ["controller", "call"])
def test_a_refused_heartbeat_keeps_kafkas_defaults(refused_by: str) -> None:
    admin = FakeAdmin()
    if refused_by == "controller":
        admin.answers["BrokerHeartbeat"] = lambda r: controller_pb2.BrokerHeartbeatResponse(
            error_code=errors_pb2.STALE_BROKER_EPOCH, is_fenced=False
        )
        expected = ErrorCode.stale_broker_epoch
    else:
        admin.answers["BrokerHeartbeat"] = lambda r: AdminCallError(
            grpc.StatusCode.FAILED_PRECONDITION, "not the leader", error_metadata("NOT_CONTROLLER")
        )
        expected = ErrorCode.not_controller
    response = ask(admin, 63, 1, REQUESTS[63])
    assert (response.error_code, response.is_caught_up, response.is_fenced, response.should_shut_down) == (
        expected, False, True, False
    )  # fmt: skip


@pytest.mark.parametrize("version", [2, 3])
def test_alter_partition_names_members_with_epochs_from_v3_and_unchecked_before(version: int) -> None:
    admin = full_admin()
    response = ask(admin, 56, version, REQUESTS[56])
    assert response.error_code == ErrorCode.none
    [topic] = response.topics
    assert topic.topic_id == TOPIC_ID
    [partition] = topic.partitions
    assert (partition.error_code, partition.leader_id, partition.leader_epoch, partition.partition_epoch) == (
        ErrorCode.none, 1, 1, 3
    )  # fmt: skip
    assert list(partition.isr) == [1, 2]
    sent = admin.sent(0)
    assert (sent.broker_id, sent.broker_epoch) == (1, 10)
    [sent_partition] = sent.topics[0].partitions
    assert (sent_partition.leader_epoch, sent_partition.partition_epoch) == (1, 2)
    epochs = [(b.broker_id, b.broker_epoch) for b in sent_partition.new_isr_with_epochs]
    assert epochs == ([(1, 10), (2, -1)] if version == 3 else [(1, -1), (2, -1)])


def test_alter_partition_refusals_per_partition_and_for_the_whole_request() -> None:
    admin = FakeAdmin()
    admin.answers["AlterPartition"] = lambda r: controller_pb2.AlterPartitionResponse(
        topics=[
            controller_pb2.AlterPartitionTopicResult(
                topic_id=TOPIC_ID.bytes,
                partitions=[
                    controller_pb2.AlterPartitionPartitionResult(
                        partition_index=0, error_code=errors_pb2.FENCED_LEADER_EPOCH, error_message="old epoch"
                    )
                ],
            )
        ]
    )
    [topic] = ask(admin, 56, 3, REQUESTS[56]).topics
    [partition] = topic.partitions
    assert (partition.error_code, partition.leader_id, list(partition.isr), partition.partition_epoch) == (
        ErrorCode.fenced_leader_epoch, 0, [], 0
    )  # fmt: skip
    admin.answers["AlterPartition"] = lambda r: controller_pb2.AlterPartitionResponse(
        error_code=errors_pb2.STALE_BROKER_EPOCH, error_message="Expected broker epoch 3"
    )
    stale = ask(admin, 56, 3, REQUESTS[56])
    assert (stale.error_code, stale.topics) == (ErrorCode.stale_broker_epoch, ())


def test_alter_partition_passes_the_leader_recovery_state_for_the_controller_to_judge() -> None:
    admin = full_admin()
    values = {**REQUESTS[56]}
    values["topics"] = [{**values["topics"][0], "partitions": [{**values["topics"][0]["partitions"][0],
                                                                "leader_recovery_state": 1}]}]  # fmt: skip
    ask(admin, 56, 3, values)
    assert admin.sent(0).topics[0].partitions[0].leader_recovery_state == 1


def test_allocate_producer_ids_is_the_controllers_and_answers_its_block() -> None:
    admin = full_admin()
    response = ask(admin, 67, 0, REQUESTS[67])
    assert (response.error_code, response.producer_id_start, response.producer_id_len) == (ErrorCode.none, 3000, 1000)
    assert admin.methods() == ["AllocateProducerIds"]
    assert (admin.sent(0).broker_id, admin.sent(0).broker_epoch) == (1, 10)


@pytest.mark.parametrize("refused_by", ["controller", "call"])
def test_a_refused_allocation_answers_an_empty_block(refused_by: str) -> None:
    admin = FakeAdmin()
    if refused_by == "controller":
        admin.answers["AllocateProducerIds"] = lambda r: controller_pb2.AllocateProducerIdsResponse(
            error_code=errors_pb2.STALE_BROKER_EPOCH, error_message="Expected broker epoch 9, but got broker epoch 10"
        )
        expected = ErrorCode.stale_broker_epoch
    else:
        admin.answers["AllocateProducerIds"] = lambda r: AdminCallError(
            grpc.StatusCode.FAILED_PRECONDITION, "not the leader", error_metadata("NOT_CONTROLLER")
        )
        expected = ErrorCode.not_controller
    response = ask(admin, 67, 0, REQUESTS[67])
    assert (response.error_code, response.producer_id_start, response.producer_id_len) == (expected, 0, 0)


def _with_version(frame: bytes, version: int) -> bytes:
    return frame[:2] + version.to_bytes(2, "big") + frame[4:]


def _envelope(inner: bytes) -> dict[str, Any]:
    return {"request_data": inner, "request_principal": b"\x00principal", "client_host_address": bytes([127, 0, 0, 1])}


def test_an_envelope_is_answered_by_the_forwarded_requests_own_handler() -> None:
    """A broker forwards a client's CreateTopics (admin, or auto-creation of __consumer_offsets)."""
    admin = full_admin()
    inner = request_bytes(19, 7, REQUESTS[19], correlation_id=4242)
    response = ask(admin, 58, 0, _envelope(inner))
    assert response.error_code == ErrorCode.none and response.response_data is not None
    correlation_id, created = decode_response(framed(response.response_data), 19, 7)
    assert correlation_id == 4242, "the answer is correlated to the client's request, not the envelope"
    assert [(t.name, t.error_code) for t in created.topics] == [
        (t["name"], ErrorCode.none) for t in REQUESTS[19]["topics"]
    ]
    assert admin.methods() == ["CreateTopics"]


@pytest.mark.parametrize(
    "inner",
    [
        request_bytes(63, 1, REQUESTS[63]),  # a broker's own call: not forwardable
        request_bytes(19, 7, REQUESTS[19])[:9],  # cut inside the header
        _with_version(request_bytes(19, 7, REQUESTS[19]), 99),  # a version nobody serves
    ],
    ids=["not-forwardable", "truncated", "unsupported-version"],
)
def test_an_envelope_kraft_refuses_is_invalid_request_with_no_answer_inside(inner: bytes) -> None:
    admin = full_admin()
    response = ask(admin, 58, 0, _envelope(inner))
    assert (response.error_code, response.response_data) == (ErrorCode.invalid_request, None)
    assert admin.calls == []
