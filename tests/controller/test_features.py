"""Feature levels in the image (FeatureLevelRecord, Kafka's FeatureControlManager replay):
metadata.version among them, level 0 removing a feature, snapshots keeping them."""

from __future__ import annotations

import pytest

from raftmeta.controller.errors import ReplayError
from raftmeta.controller.image import MetadataImage
from raftmeta.controller.snapshot import image_from_records, image_to_records
from raftmeta.v1 import records_pb2


def level(name: str, value: int) -> records_pb2.MetadataRecord:
    return records_pb2.MetadataRecord(feature_level=records_pb2.FeatureLevelRecord(name=name, feature_level=value))


def test_a_feature_level_is_set_changed_and_removed_by_level_0() -> None:
    image = MetadataImage.empty().replay_all([level("metadata.version", 27), level("group.version", 1)])
    assert dict(image.features) == {"metadata.version": 27, "group.version": 1}
    image = image.replay_all([level("metadata.version", 30), level("group.version", 0)])
    assert dict(image.features) == {"metadata.version": 30}
    assert image.feature_level("group.version") is None


def test_feature_levels_come_first_in_a_snapshot_and_back_exactly() -> None:
    image = MetadataImage.empty().replay_all([level("metadata.version", 30), level("a.version", 2)])
    records = image_to_records(image)
    assert [r.feature_level.name for r in records] == ["a.version", "metadata.version"]
    assert image_from_records(records) == image


@pytest.mark.parametrize(
    ("record", "rule"),
    [(level("", 3), "name must not be empty"), (level("metadata.version", 1 << 15), "outside 0..32767")],
)
def test_replay_refuses_a_feature_level_kafka_cannot_hold(record: records_pb2.MetadataRecord, rule: str) -> None:
    with pytest.raises(ReplayError, match=rule):
        MetadataImage.empty().replay(record)
