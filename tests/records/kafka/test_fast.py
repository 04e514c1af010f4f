"""The fixed-layout path of PartitionRecord and PartitionChangeRecord (raftmeta/records/kafka/fast.py)
is the generic field-table path's: the same bytes for generated records and for every partition
record of a real KRaft log (data/README.md), the same fields read back, and anything outside its
layout left to the generic path (None), never misread."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftmeta.records.kafka import extensions, fast
from raftmeta.records.kafka.batch import Record, encode_record, iter_batches
from raftmeta.records.kafka.frames import MetadataRecord, decode_metadata, encode_metadata
from raftmeta.records.kafka.message import Struct
from raftmeta.records.kafka.schema import Uuid
from raftmeta.records.kafka.schemas import METADATA_RECORD_NAMES

DATA = Path(__file__).parent / "data"
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
IDS = st.lists(st.integers(-1, (1 << 31) - 1), max_size=7).map(tuple)
UUID = st.binary(min_size=16, max_size=16)
PARTITION = METADATA_RECORD_NAMES["PartitionRecord"]
CHANGE = METADATA_RECORD_NAMES["PartitionChangeRecord"]


@st.composite
def partitions(draw: st.DrawFn) -> fast.KafkaPartition:
    replicas = draw(IDS)
    return fast.KafkaPartition(
        draw(UUID),
        draw(INT32),
        replicas,
        draw(st.one_of(st.just(replicas), IDS)),
        draw(IDS),
        draw(IDS),
        draw(INT32),
        draw(INT32),
        draw(INT32),
        tuple(draw(st.lists(UUID, max_size=4))),
        draw(st.integers(-128, 127)),
        draw(st.one_of(st.none(), IDS)),
        draw(st.one_of(st.none(), IDS)),
    )


@st.composite
def changes(draw: st.DrawFn) -> fast.KafkaPartitionChange:
    maybe_ids = st.one_of(st.none(), IDS)
    return fast.KafkaPartitionChange(
        draw(UUID),
        draw(INT32),
        isr=draw(maybe_ids),
        leader=draw(st.one_of(st.just(fast.NO_LEADER_CHANGE), INT32)),
        replicas=draw(maybe_ids),
        removing_replicas=draw(maybe_ids),
        adding_replicas=draw(maybe_ids),
        leader_recovery_state=draw(st.integers(-128, 127)),
        eligible_leader_replicas=draw(maybe_ids),
        last_known_elr=draw(maybe_ids),
        directories=draw(st.one_of(st.none(), st.lists(UUID, max_size=3).map(tuple))),
        raftmeta_leader_epoch=draw(INT32),
        raftmeta_partition_epoch=draw(INT32),
        raftmeta_unclean_election=draw(st.booleans()),
    )


def _generic_partition(p: fast.KafkaPartition) -> bytes:
    values = {
        "PartitionId": p.partition_id,
        "TopicId": Uuid(p.topic_id),
        "Replicas": p.replicas,
        "Isr": p.isr,
        "RemovingReplicas": p.removing_replicas,
        "AddingReplicas": p.adding_replicas,
        "Leader": p.leader,
        "LeaderRecoveryState": p.leader_recovery_state,
        "LeaderEpoch": p.leader_epoch,
        "PartitionEpoch": p.partition_epoch,
        "Directories": tuple(Uuid(d) for d in p.directories),
        "EligibleLeaderReplicas": p.eligible_leader_replicas,
        "LastKnownElr": p.last_known_elr,
    }
    return encode_metadata(MetadataRecord(PARTITION, 2, Struct(values)), extensions.METADATA)


def _generic_change(c: fast.KafkaPartitionChange) -> bytes:
    values = {
        "PartitionId": c.partition_id,
        "TopicId": Uuid(c.topic_id),
        "Isr": c.isr,
        "Leader": c.leader,
        "Replicas": c.replicas,
        "RemovingReplicas": c.removing_replicas,
        "AddingReplicas": c.adding_replicas,
        "LeaderRecoveryState": c.leader_recovery_state,
        "Directories": None if c.directories is None else tuple(Uuid(d) for d in c.directories),
        "EligibleLeaderReplicas": c.eligible_leader_replicas,
        "LastKnownElr": c.last_known_elr,
        "RaftmetaLeaderEpoch": c.raftmeta_leader_epoch,
        "RaftmetaPartitionEpoch": c.raftmeta_partition_epoch,
        "RaftmetaUncleanElection": c.raftmeta_unclean_election,
    }
    return encode_metadata(MetadataRecord(CHANGE, 2, Struct(values)), extensions.METADATA)


@settings(max_examples=300, deadline=None)
@given(p=partitions())
def test_partition_record_bytes_equal_the_generic_paths(p: fast.KafkaPartition) -> None:
    value = fast.partition_value(p)
    assert value == _generic_partition(p)
    assert fast.read_partition(value) == p


@settings(max_examples=300, deadline=None)
@given(c=changes())
def test_partition_change_record_bytes_equal_the_generic_paths(c: fast.KafkaPartitionChange) -> None:
    value = fast.partition_change_value(c)
    assert value == _generic_change(c)
    assert fast.read_partition_change(value) == c


def _stored_values(api_key: int) -> list[bytes]:
    found = []
    for path in sorted(DATA.glob("*.log")) + sorted(DATA.glob("*.checkpoint")):
        for _, batch in iter_batches(path.read_bytes()):
            if batch.is_control:
                continue
            for record in batch.records:
                assert record.value is not None
                if decode_metadata(record.value).api_key == api_key:
                    found.append(record.value)
    return found


@pytest.mark.parametrize("api_key", [PARTITION, CHANGE])
def test_every_partition_record_of_a_real_kraft_log_reads_and_writes_back_byte_for_byte(api_key: int) -> None:
    values = _stored_values(api_key)
    assert len(values) >= 5, "the real log holds partition records and their changes (data/README.md)"
    for value in values:
        generic = decode_metadata(value)
        assert isinstance(generic.data, Struct)
        if api_key == PARTITION:
            p = fast.read_partition(value)
            assert p is not None
            assert fast.partition_value(p) == value
            assert _generic_partition(p) == value
            assert (p.topic_id, p.replicas, p.isr, p.leader, p.directories) == (
                generic.data["TopicId"].raw,  # type: ignore[attr-defined]
                generic.data["Replicas"],
                generic.data["Isr"],
                generic.data["Leader"],
                tuple(d.raw for d in generic.data["Directories"]),  # type: ignore[attr-defined]
            )
        else:
            c = fast.read_partition_change(value)
            assert c is not None
            assert fast.partition_change_value(c) == value
            assert _generic_change(c) == value
            assert (c.isr, c.leader, c.replicas) == (
                generic.data["Isr"],
                generic.data["Leader"],
                generic.data["Replicas"],
            )


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"\x01\x03\x01" + bytes(30),  # PartitionRecord v1: not this layout
        fast.PARTITION_FRAME + bytes(5),  # cut short
        fast.PARTITION_CHANGE_FRAME + bytes(20) + b"\x01\x63\x00",  # an unknown tag (99)
        fast.PARTITION_CHANGE_FRAME + bytes(20) + b"\x01\x00\x01\x00",  # Isr null inside its tag
        fast.PARTITION_CHANGE_FRAME + bytes(20) + b"\x02\x01\x04\x00\x00\x00\x01\x00\x01\x01",  # tags descending
    ],
)
def test_bytes_outside_the_layout_are_left_to_the_generic_path(value: bytes) -> None:
    assert fast.read_partition(value) is None
    assert fast.read_partition_change(value) is None


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.binary(max_size=300), min_size=1, max_size=20))
def test_the_fast_record_split_reads_what_the_fast_framing_writes(values: list[bytes]) -> None:
    framed = fast.frame_metadata_values(values)
    assert fast.metadata_values(framed, 0, len(framed), len(values)) == values
    assert fast.metadata_values(framed, 0, len(framed), len(values) - 1) is None  # a record left over
    keyed = encode_record(Record(0, 0, b"k", values[0]))  # a key: not KRaft's framing
    assert fast.metadata_values(keyed, 0, len(keyed), 1) is None
    stamped = encode_record(Record(0, 5, None, values[0]))  # a timestamp delta
    assert fast.metadata_values(stamped, 0, len(stamped), 1) is None
