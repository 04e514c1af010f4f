"""Snapshots: the image as a list of records, and back (KIP-630's content, without the framing).

``image_to_records`` writes the fewest records that rebuild the image exactly: brokers (with their
epoch and fenced state), non-topic configs, then per topic (by name) its TopicRecord, ConfigRecords
and full-state PartitionRecords (epochs included), then the answered request ids oldest first, so
eviction after a reload removes the same ids as on a node that replayed the whole log.
``image_from_records(image_to_records(image)) == image`` for every image.
"""

from __future__ import annotations

from collections.abc import Iterable

from raftmeta.controller.delta import ImageBuilder
from raftmeta.controller.image import REQUEST_TABLE_CAPACITY, TOPIC_RESOURCE, MetadataImage
from raftmeta.v1 import records_pb2


def image_to_records(image: MetadataImage) -> list[records_pb2.MetadataRecord]:
    out: list[records_pb2.MetadataRecord] = []
    for broker in sorted(image.brokers.values(), key=lambda b: b.id):
        out.append(
            records_pb2.MetadataRecord(
                register_broker=records_pb2.RegisterBrokerRecord(
                    broker_id=broker.id,
                    incarnation_id=broker.incarnation_id,
                    broker_epoch=broker.epoch,
                    rack=broker.rack,
                    pool=broker.pool,
                    endpoints=[
                        records_pb2.BrokerEndpoint(name=e.name, host=e.host, port=e.port) for e in broker.endpoints
                    ],
                    fenced=broker.fenced,
                )
            )
        )
    for (resource_type, resource_name), configs in sorted(image.configs.items()):
        for name in sorted(configs):
            out.append(_config(resource_type, resource_name, name, configs[name]))
    for topic in image.topics_sorted():
        topic_record = records_pb2.TopicRecord(name=topic.name, topic_id=topic.topic_id)
        if topic.pool is not None:
            topic_record.broker_pool = topic.pool
        out.append(records_pb2.MetadataRecord(topic=topic_record))
        for name in sorted(topic.configs):
            out.append(_config(TOPIC_RESOURCE, topic.name, name, topic.configs[name]))
        for pid, part in enumerate(topic.partitions):
            out.append(
                records_pb2.MetadataRecord(
                    partition=records_pb2.PartitionRecord(
                        topic_id=topic.topic_id,
                        partition_id=pid,
                        replicas=part.replicas,
                        isr=part.isr,
                        removing_replicas=part.removing_replicas,
                        adding_replicas=part.adding_replicas,
                        leader=part.leader,
                        leader_epoch=part.leader_epoch,
                        partition_epoch=part.partition_epoch,
                    )
                )
            )
    for request_id, entry in image.requests.in_order():
        out.append(
            records_pb2.MetadataRecord(
                request=records_pb2.RequestRecord(request_id=request_id, method=entry.method, response=entry.response)
            )
        )
    return out


def image_from_records(
    records: Iterable[records_pb2.MetadataRecord], request_table_capacity: int = REQUEST_TABLE_CAPACITY
) -> MetadataImage:
    builder = ImageBuilder(MetadataImage.empty(request_table_capacity))
    builder.replay_all(records)
    return builder.build()


def _config(resource_type: int, resource_name: str, name: str, value: str) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        config=records_pb2.ConfigRecord(
            resource_type=resource_type,  # type: ignore[arg-type]
            resource_name=resource_name,
            name=name,
            value=value,
        )
    )
