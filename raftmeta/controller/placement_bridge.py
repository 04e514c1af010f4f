"""The one place the controller calls the ``placement`` package.

Everything placement needs from the image (usable brokers sorted by id, per-broker load) is built
here, and every ``placement`` exception is turned into Kafka's per-topic error here:
``InvalidReplicationFactorError`` -> INVALID_REPLICATION_FACTOR, ``InvalidPartitionsError`` ->
INVALID_PARTITIONS, ``InvalidReplicaAssignmentError`` -> INVALID_REPLICA_ASSIGNMENT, any other
``PlacementError`` -> INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Submodule imports on purpose: the shared venv's editable install maps ``placement`` as a
# namespace package (it was installed before placement/__init__.py existed), so outside the
# repository root ``from placement import X`` fails while ``from placement.api import X`` works.
from placement.api import PLACERS as PLACEMENT_PLACERS
from placement.api import place_replicas
from placement.balanced import BalancedReplicaPlacer
from placement.brokers import UsableBroker, check_distinct_ids
from placement.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementError,
)
from placement.legacy import add_partitions
from placement.manual import validate_replica_assignment
from placement.pools import pool_brokers, restrict_to_pool
from placement.rng import RandomSource
from placement.striped import StripedBrokers, StripedReplicaPlacer
from raftmeta.controller.errors import ApiError
from raftmeta.controller.image import BrokerRegistration, MetadataImage
from raftmeta.v1 import errors_pb2

# The placer names a request may give (placement's list: striped, legacy, balanced).
PLACERS: tuple[str, ...] = tuple(PLACEMENT_PLACERS)

__all__ = [
    "PLACERS",
    "PlacementError",
    "broker_load",
    "place",
    "to_api_error",
    "unknown_placer",
    "usable_brokers",
    "validate_manual",
]


class _BrokerSet:
    """What placement derives from one broker registry value: the usable brokers sorted by id and,
    per pool, the striped placer's rack structure. An image's ``brokers`` mapping is never mutated
    (replay copies it on write), and it changes only with broker records -- registrations,
    fencing -- not with topic creation, so these are built once per registry instead of per
    request (they were about two thirds of placing a 1-partition topic)."""

    __slots__ = ("registry", "striped", "usable")

    def __init__(self, registry: Mapping[int, BrokerRegistration]) -> None:
        # Held so that its id stays unique while this entry is cached.
        self.registry = registry
        self.usable: tuple[UsableBroker, ...] = tuple(
            UsableBroker(b.id, rack=b.rack, fenced=b.fenced, pool=b.pool)
            for b in sorted(registry.values(), key=lambda b: b.id)
        )
        self.striped: dict[str | None, StripedBrokers] = {}

    def striped_brokers(self, pool: str | None) -> StripedBrokers:
        """The rack structure of the pool's brokers (all brokers for None), by id as placement sees them."""
        racks = self.striped.get(pool)
        if racks is None:
            members = pool_brokers(self.usable, pool)
            check_distinct_ids(members)
            racks = StripedBrokers(members)
            self.striped[pool] = racks
        return racks


# Registry id -> derived placement inputs. A few entries: the committed and the working image of
# a leader usually share one registry; a bounded dict cannot grow with a long-lived process.
_BROKER_SETS: dict[int, _BrokerSet] = {}
_BROKER_SETS_MAX = 8


def _broker_set(image: MetadataImage) -> _BrokerSet:
    registry = image.brokers
    found = _BROKER_SETS.get(id(registry))
    if found is None or found.registry is not registry:
        if len(_BROKER_SETS) >= _BROKER_SETS_MAX:
            _BROKER_SETS.clear()
        found = _BrokerSet(registry)
        _BROKER_SETS[id(registry)] = found
    return found


def usable_brokers(image: MetadataImage) -> list[UsableBroker]:
    """Every registered broker, sorted by id (DESIGN §6: the controller passes brokers sorted)."""
    return list(_broker_set(image).usable)


def broker_load(image: MetadataImage, extra: Mapping[int, tuple[int, int]] | None = None) -> dict[int, tuple[int, int]]:
    """broker id -> (replicas, leaders) already on it, for the balanced placer. The image keeps
    the counts incrementally, so this is O(brokers); ``extra`` adds what earlier topics of the
    same request will place."""
    extra = extra or {}
    load: dict[int, tuple[int, int]] = {}
    for broker in image.brokers:
        more = extra.get(broker, (0, 0))
        load[broker] = (image.replica_counts.get(broker, 0) + more[0], image.leader_counts.get(broker, 0) + more[1])
    return load


def to_api_error(error: PlacementError, *, replication_factor: int | None = None) -> ApiError:
    """Kafka's error code for a placement failure. CreateTopics wraps a replication-factor error
    as Kafka's ``createTopic`` does ("Unable to replicate the partition N time(s): ...")."""
    if isinstance(error, InvalidReplicationFactorError):
        message = str(error)
        if replication_factor is not None:
            message = f"Unable to replicate the partition {replication_factor} time(s): {message}"
        return ApiError(errors_pb2.INVALID_REPLICATION_FACTOR, message)
    if isinstance(error, InvalidPartitionsError):
        return ApiError(errors_pb2.INVALID_PARTITIONS, str(error))
    if isinstance(error, InvalidReplicaAssignmentError):
        return ApiError(errors_pb2.INVALID_REPLICA_ASSIGNMENT, str(error))
    return ApiError(errors_pb2.INVALID_REQUEST, str(error))


def unknown_placer(name: str) -> ApiError:
    return ApiError(errors_pb2.INVALID_REQUEST, f"Unknown placer '{name}': expected one of {', '.join(PLACERS)}.")


def place(
    image: MetadataImage,
    placer: str,
    num_partitions: int,
    replication_factor: int,
    random: RandomSource,
    *,
    pool: str | None,
    existing: Sequence[Sequence[int]] = (),
    extra_load: Mapping[int, tuple[int, int]] | None = None,
) -> list[list[int]]:
    """Replicas (leader first) for ``num_partitions`` new partitions after ``existing`` ones.

    Raises ``PlacementError``; callers turn it into an ApiError with :func:`to_api_error`.
    """
    broker_set = _broker_set(image)
    if placer == "striped":
        # placement.api.place_replicas's striped path (and its add-partitions one), with the rack
        # structure taken from the cache: restrict_to_pool still runs first for a pool, for its
        # checks (unknown pool, too few brokers for the factor, all fenced).
        if pool is not None:
            restrict_to_pool(broker_set.usable, pool, replication_factor)
        return StripedReplicaPlacer(random).place(
            broker_set.striped_brokers(pool), num_partitions, replication_factor, existing=existing
        )
    brokers = list(broker_set.usable)
    load = broker_load(image, extra_load) if placer == "balanced" else None
    if not existing:
        return place_replicas(placer, brokers, num_partitions, replication_factor, random, load=load, pool=pool)
    candidates = restrict_to_pool(brokers, pool, replication_factor)
    if placer == "balanced":
        return BalancedReplicaPlacer(random).place(candidates, num_partitions, replication_factor, load)
    # legacy: Kafka's add-partitions rule, over the live brokers as AdminUtils sees them.
    live = [b for b in candidates if not b.fenced]
    added = add_partitions(live, dict(enumerate(existing)), len(existing) + num_partitions)
    return [added[pid] for pid in sorted(added)]


def validate_manual(
    image: MetadataImage,
    assignment: Sequence[Sequence[int]],
    *,
    replication_factor: int | None,
    first_partition: int,
) -> list[list[int]]:
    """A manual assignment checked against the registered brokers (raises PlacementError)."""
    return validate_replica_assignment(
        assignment, image.brokers.keys(), replication_factor=replication_factor, first_partition=first_partition
    )
