"""The controller: pure metadata image, record replay, request handlers, broker lifecycle and
partition leader election (DESIGN.md §6). No IO, no clock, no hidden randomness: time arrives as
``now_ms``, topic ids through an ``ids`` callable and placement randomness through a
``RandomSource``. docs/controller.md describes it; :mod:`raftmeta.controller.controller` has the
driver contract.

For readers of the log (``raftmeta log dump``, the simulator, the Spark job)::

    image = MetadataImage.empty()
    image = image.replay(record)            # one record
    builder = ImageBuilder(image)           # or many records, cheaply
    builder.replay(record); image = builder.build()
"""

from placement.rng import RandomSource
from raftmeta.controller.controller import METHODS, Controller, Handled
from raftmeta.controller.delta import ImageBuilder
from raftmeta.controller.errors import ApiError, ReplayError, RequestError
from raftmeta.controller.image import (
    NO_LEADER,
    REQUEST_TABLE_CAPACITY,
    BrokerRegistration,
    Endpoint,
    MetadataImage,
    PartitionRegistration,
    RequestEntry,
    TopicImage,
)
from raftmeta.controller.partition_change import Election, PartitionChangeBuilder
from raftmeta.controller.result import DEFAULT_CONFIG, ControllerConfig, ControllerResult, TopicIdSource
from raftmeta.controller.snapshot import image_from_records, image_to_records

__all__ = [
    "DEFAULT_CONFIG",
    "METHODS",
    "NO_LEADER",
    "REQUEST_TABLE_CAPACITY",
    "ApiError",
    "BrokerRegistration",
    "Controller",
    "ControllerConfig",
    "ControllerResult",
    "Election",
    "Endpoint",
    "Handled",
    "ImageBuilder",
    "MetadataImage",
    "PartitionChangeBuilder",
    "PartitionRegistration",
    "RandomSource",
    "ReplayError",
    "RequestEntry",
    "RequestError",
    "TopicIdSource",
    "TopicImage",
    "image_from_records",
    "image_to_records",
]
