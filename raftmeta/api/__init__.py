"""The ControllerService API as data: one catalogue row per RPC (raftmeta/api/catalogue.py), the
request limits, the error metadata, topic ids and paging that every side of a call shares. Pure:
no IO, so the controller, the node, the client and the Kafka listener can all read it."""

from raftmeta.api.catalogue import (
    KAFKA_APIS,
    RPCS,
    KafkaApi,
    Retry,
    Rpc,
    Served,
    check_controller_request,
    kafka_rpcs,
    rpc_row,
)

__all__ = [
    "KAFKA_APIS",
    "RPCS",
    "KafkaApi",
    "Retry",
    "Rpc",
    "Served",
    "check_controller_request",
    "kafka_rpcs",
    "rpc_row",
]
