"""The method catalogue (raftmeta/api/catalogue.py): one row per ControllerService RPC, and every
place that needs a method's facts reads them from its row."""

from __future__ import annotations

import re

import pytest

from raftmeta.api.catalogue import KAFKA_APIS, RPCS, Retry, Served, check_controller_request, kafka_rpcs, rpc_row
from raftmeta.client import ControllerClient, SyncControllerClient, SyncUnary, Unary
from raftmeta.controller.controller import HANDLERS, METHODS
from raftmeta.kafka.dispatch import HANDLERS as KAFKA_HANDLERS
from raftmeta.kafka.versions import SUPPORTED
from raftmeta.server.services import ControllerServicer, safe_to_send_again
from raftmeta.v1 import controller_pb2, controller_pb2_grpc

SERVICE = controller_pb2.DESCRIPTOR.services_by_name["ControllerService"]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_one_row_per_rpc_of_the_service_with_its_types() -> None:
    assert set(RPCS) == {m.name for m in SERVICE.methods}
    for method in SERVICE.methods:
        row = RPCS[method.name]
        assert row.request_type.DESCRIPTOR is method.input_type, method.name
        assert row.response_type.DESCRIPTOR is method.output_type, method.name


def test_request_ids_and_reads_match_the_messages() -> None:
    for row in RPCS.values():
        fields = row.request_type.DESCRIPTOR.fields_by_name
        assert row.request_id == ("request_id" in fields), row.name
        if row.reads_stale or row.retry is Retry.READ:
            assert not row.mutating, row.name
        assert (row.already_done is not None) == (row.retry is Retry.ALREADY_DONE), row.name


def test_error_fields_name_the_error_codes_of_the_answer() -> None:
    for row in RPCS.values():
        for path in row.error_fields:
            descriptor = row.response_type.DESCRIPTOR
            *parents, last = path.split(".")
            for part in parents:
                field = descriptor.fields_by_name[part]
                assert field.is_repeated, f"{row.name}: {part} is per item"
                descriptor = field.message_type
            assert last in descriptor.fields_by_name, f"{row.name}: {path}"


def test_the_controller_serves_its_rows_with_their_handlers() -> None:
    served = {name for name, row in RPCS.items() if row.served is Served.CONTROLLER}
    assert set(METHODS) == served == set(HANDLERS)
    for name, method in METHODS.items():
        assert method.request_type is RPCS[name].request_type and method.mutating == RPCS[name].mutating


def test_the_servicer_serves_every_row() -> None:
    for name in RPCS:
        served = getattr(ControllerServicer, name)
        assert served is not getattr(controller_pb2_grpc.ControllerServiceServicer, name), f"{name} is unimplemented"
        assert served.__name__ == name


def test_both_clients_have_a_method_per_row() -> None:
    """A row's method is made from the row (Unary, SyncUnary) unless it needs what the catalogue
    cannot say (convenience arguments, paging): then it is written out."""
    for name in RPCS:
        for client in (ControllerClient, SyncControllerClient):
            method = vars(client)[snake(name)]
            if isinstance(method, Unary | SyncUnary):
                assert method.row is RPCS[name], (client.__name__, name)
            else:
                assert callable(method), (client.__name__, name)


def test_kafka_apis_are_the_listeners_and_map_onto_rows() -> None:
    assert set(KAFKA_HANDLERS) == set(KAFKA_APIS) == set(SUPPORTED)
    for row in RPCS.values():
        assert set(row.kafka_api_keys) <= set(KAFKA_APIS), row.name
    assert [r.name for r in kafka_rpcs(19)] == ["CreateTopics"]
    assert {r.name for r in kafka_rpcs(3)} == {"DescribeTopics", "DescribeCluster"}
    assert kafka_rpcs(18) == ()  # ApiVersions: the listener answers it alone


@pytest.mark.parametrize(
    ("method", "request_", "safe"),
    [
        ("CreateTopics", controller_pb2.CreateTopicsRequest(), False),  # no id: a second attempt may create twice
        ("CreateTopics", controller_pb2.CreateTopicsRequest(request_id="r"), True),
        ("DescribeTopics", controller_pb2.DescribeTopicsRequest(), True),
        ("DescribeQuorum", controller_pb2.DescribeQuorumRequest(), True),
        ("BrokerHeartbeat", controller_pb2.BrokerHeartbeatRequest(broker_id=1), True),
        ("AlterPartition", controller_pb2.AlterPartitionRequest(), False),
        ("AddRaftVoter", controller_pb2.AddRaftVoterRequest(), False),  # refused when retried after success
        ("UpdateRaftVoter", controller_pb2.UpdateRaftVoterRequest(), False),
        ("NoSuchMethod", controller_pb2.DescribeTopicsRequest(), False),
    ],
)
def test_retry_safety_is_the_rows(method: str, request_: controller_pb2.DescribeTopicsRequest, safe: bool) -> None:
    assert safe_to_send_again(method, request_) is safe


def test_limits_are_the_rows() -> None:
    too_many = controller_pb2.DeleteTopicsRequest(topic_names=["t"] * 20_000)
    violation = check_controller_request("DeleteTopics", too_many)
    assert violation is not None and "TOPICS_PER_REQUEST_MAX" in violation.message
    assert rpc_row("DescribeCluster").limits is None
    assert check_controller_request("DescribeCluster", controller_pb2.DescribeClusterRequest()) is None


def test_an_unknown_method_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown ControllerService method 'Nope': expected one of CreateTopics"):
        rpc_row("Nope")
