"""The voter set as Kafka brokers must read it: each voter's Kafka listener as its CONTROLLER
endpoint.

raftmeta's VotersRecord names each voter's raft (gRPC) address under ``CONTROLLER``
(raftmeta.server.addresses); a Kafka broker's raft client and its controller channels take the
voter set from the log and snapshot (kraft.version 1) and speak the Kafka protocol to the
endpoint named by its ``controller.listener.names`` -- on raftmeta, the node's Kafka listener. So
the batches served through the Kafka listener (Fetch, FetchSnapshot) carry every VotersRecord
with the voters' Kafka listeners, the ones the node was told of (``--kafka-listener``,
``--kafka-peers``), under ``CONTROLLER``; a voter whose Kafka listener the node does not know is
listed without endpoints (a broker cannot reach it, as it could not reach its gRPC address).
Every other record, and every offset, epoch and timestamp, is served as the log holds it.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftmeta.kafka.context import KafkaNode
from raftmeta.records import codec
from raftmeta.server.addresses import CONTROLLER_LISTENER
from raftmeta.v1 import records_pb2


def _rewritten(record: records_pb2.MetadataRecord, listeners: dict[int, KafkaNode]) -> bytes:
    for voter in record.voters.voters:
        del voter.endpoints[:]
        node = listeners.get(voter.voter_id)
        if node is not None:
            voter.endpoints.add(name=CONTROLLER_LISTENER, host=node.host, port=node.port)
    return record.SerializeToString()


def with_kafka_listeners(data: bytes, nodes: Sequence[KafkaNode]) -> bytes:
    """raftmeta batches (a log read or a snapshot file) with each VotersRecord's endpoints the
    voters' Kafka listeners; batches without one are returned byte for byte."""
    listeners = {n.node_id: n for n in nodes}
    out = []
    for batch in codec.iter_batches(data):
        if not batch.header.is_control:
            out.append(batch.data)
            continue
        changed = False
        records = []
        for raw in batch.records():
            record = records_pb2.MetadataRecord.FromString(raw)
            if record.WhichOneof("record") == "voters":
                records.append(_rewritten(record, listeners))
                changed = True
            else:
                records.append(raw)
        if not changed:
            out.append(batch.data)
            continue
        h = batch.header
        out.append(codec.encode_batch(h.base_offset, h.epoch, records, h.append_timestamp_ms, control=True))
    return b"".join(out)
