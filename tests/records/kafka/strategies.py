"""Hypothesis strategies of raftmeta's records: every type the mapping to Kafka's format takes,
with the values each field can hold where Kafka's field can hold them too (a 16-byte id, a port
below 65536, an int16 version)."""

from __future__ import annotations

from hypothesis import strategies as st

from raftmeta.v1 import records_pb2

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
BROKER = st.integers(-1, (1 << 31) - 1)
UUID = st.binary(min_size=16, max_size=16)
TEXT = st.text(max_size=12)
IDS = st.lists(st.integers(0, (1 << 31) - 1), max_size=6)
PORT = st.integers(0, 65535)
DIRECTORIES = st.lists(UUID, max_size=4)  # KIP-858 log directory ids


@st.composite
def partition(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        partition=records_pb2.PartitionRecord(
            topic_id=draw(UUID),
            partition_id=draw(INT32),
            replicas=draw(IDS),
            isr=draw(IDS),
            removing_replicas=draw(IDS),
            adding_replicas=draw(IDS),
            leader=draw(BROKER),
            leader_epoch=draw(INT32),
            partition_epoch=draw(INT32),
            directories=draw(DIRECTORIES),
        )
    )


@st.composite
def partition_change(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    change = records_pb2.PartitionChangeRecord(
        topic_id=draw(UUID),
        partition_id=draw(INT32),
        leader_epoch=draw(INT32),
        partition_epoch=draw(INT32),
        unclean_election=draw(st.booleans()),
    )
    if draw(st.booleans()):
        change.leader = draw(BROKER)
    for name in ("isr", "replicas", "removing_replicas", "adding_replicas"):
        if draw(st.booleans()):
            getattr(change, name).ids.extend(draw(IDS))
            getattr(change, name).SetInParent()
    if draw(st.booleans()):
        change.directories.SetInParent()
        change.directories.ids.extend(draw(DIRECTORIES))
    return records_pb2.MetadataRecord(partition_change=change)


@st.composite
def topic(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    record = records_pb2.TopicRecord(name=draw(TEXT), topic_id=draw(UUID))
    if draw(st.booleans()):
        record.broker_pool = draw(TEXT)
    return records_pb2.MetadataRecord(topic=record)


@st.composite
def register_broker(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    record = records_pb2.RegisterBrokerRecord(
        broker_id=draw(INT32),
        incarnation_id=draw(UUID),
        broker_epoch=draw(INT64),
        fenced=draw(st.booleans()),
        endpoints=[
            records_pb2.BrokerEndpoint(
                name=draw(st.sampled_from(["PLAINTEXT", "SSL", "INTERNAL"])), host=draw(TEXT), port=draw(PORT)
            )
            for _ in range(draw(st.integers(0, 3)))
        ],
        log_dirs=draw(DIRECTORIES),
    )
    if draw(st.booleans()):
        record.rack = draw(TEXT)
    if draw(st.booleans()):
        record.pool = draw(TEXT)
    return records_pb2.MetadataRecord(register_broker=record)


@st.composite
def config(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    record = records_pb2.ConfigRecord(
        resource_type=draw(st.sampled_from(records_pb2.ConfigResourceType.values())),
        resource_name=draw(TEXT),
        name=draw(TEXT),
    )
    if draw(st.booleans()):
        record.value = draw(TEXT)
    return records_pb2.MetadataRecord(config=record)


@st.composite
def request(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        request=records_pb2.RequestRecord(
            request_id=draw(TEXT),
            method=draw(TEXT),
            response=draw(st.binary(max_size=40)),
            request_sha256=draw(st.binary(max_size=32)),
        )
    )


@st.composite
def leader_change(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(
        leader_change=records_pb2.LeaderChangeRecord(
            leader_id=draw(INT32),
            leader_epoch=draw(INT32),
            voters=[records_pb2.Voter(voter_id=v) for v in draw(IDS)],
            granting_voters=[records_pb2.Voter(voter_id=v) for v in draw(IDS)],
        )
    )


@st.composite
def voters(draw: st.DrawFn) -> records_pb2.MetadataRecord:
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        directory = draw(st.one_of(st.just(b""), UUID.filter(lambda raw: raw != bytes(16))))
        entries.append(
            records_pb2.VoterEntry(
                voter_id=draw(INT32),
                directory_id=directory,
                endpoints=[
                    records_pb2.VoterEndpoint(name=draw(TEXT), host=draw(TEXT), port=draw(PORT))
                    for _ in range(draw(st.integers(0, 2)))
                ],
                min_supported_version=draw(INT16),
                max_supported_version=draw(INT16),
            )
        )
    return records_pb2.MetadataRecord(voters=records_pb2.VotersRecord(version=draw(INT16), voters=entries))


def _broker_change(kind: str) -> st.SearchStrategy[records_pb2.MetadataRecord]:
    """An (un)fence or unregister record: a broker id and epoch."""

    def build(broker_id: int, broker_epoch: int) -> records_pb2.MetadataRecord:
        record = records_pb2.MetadataRecord()
        change = getattr(record, kind)
        change.broker_id = broker_id
        change.broker_epoch = broker_epoch
        return record

    return st.builds(build, INT32, INT64)


# One strategy per record type raftmeta writes (the oneof's every case).
BY_TYPE: dict[str, st.SearchStrategy[records_pb2.MetadataRecord]] = {
    "topic": topic(),
    "partition": partition(),
    "partition_change": partition_change(),
    "remove_topic": st.builds(
        lambda t: records_pb2.MetadataRecord(remove_topic=records_pb2.RemoveTopicRecord(topic_id=t)), UUID
    ),
    "register_broker": register_broker(),
    "unregister_broker": _broker_change("unregister_broker"),
    "fence_broker": _broker_change("fence_broker"),
    "unfence_broker": _broker_change("unfence_broker"),
    "broker_log_dirs_change": st.builds(
        lambda broker, epoch, dirs: records_pb2.MetadataRecord(
            broker_log_dirs_change=records_pb2.BrokerLogDirsChangeRecord(
                broker_id=broker, broker_epoch=epoch, log_dirs=dirs
            )
        ),
        INT32,
        INT64,
        DIRECTORIES,
    ),
    "config": config(),
    "leader_change": leader_change(),
    "no_op": st.just(records_pb2.MetadataRecord(no_op=records_pb2.NoOpRecord())),
    "request": request(),
    "snapshot_header": st.builds(
        lambda v, t: records_pb2.MetadataRecord(
            snapshot_header=records_pb2.SnapshotHeaderRecord(version=v, last_contained_log_timestamp_ms=t)
        ),
        INT16,
        INT64,
    ),
    "snapshot_footer": st.builds(
        lambda v: records_pb2.MetadataRecord(snapshot_footer=records_pb2.SnapshotFooterRecord(version=v)), INT16
    ),
    "voters": voters(),
    "feature_level": st.builds(
        lambda name, level: records_pb2.MetadataRecord(
            feature_level=records_pb2.FeatureLevelRecord(name=name, feature_level=level)
        ),
        TEXT,
        INT16,
    ),
    "producer_ids": st.builds(
        lambda broker, epoch, next_id: records_pb2.MetadataRecord(
            producer_ids=records_pb2.ProducerIdsRecord(broker_id=broker, broker_epoch=epoch, next_producer_id=next_id)
        ),
        INT32,
        INT64,
        INT64,
    ),
}
ANY_RECORD = st.one_of(*BY_TYPE.values())
