"""Replicas' log directories (KIP-858), as Kafka's controller keeps them.

A partition keeps one directory id per replica, in replica order (Kafka's
``PartitionRegistration.directories``). Three ids are reserved (Kafka's ``DirectoryId``):

- ``MIGRATING`` (the all-zero uuid): the replica lives in *some* directory of its broker, not
  yet said which -- what every replica of a cluster upgraded from before KIP-858 has, and what
  a broker that registered no directories (raftmeta's simulated brokers) gets;
- ``UNASSIGNED`` (uuid 1): a new replica on a broker with several directories, until the broker
  says which holds it (AssignReplicasToDirs);
- ``LOST`` (uuid 2): the directory went offline unidentified.

A new replica gets its broker's *default directory* (Kafka's ``ClusterControlManager.defaultDir``):
the broker's only directory when it registered one, MIGRATING when it registered none,
UNASSIGNED when it registered several (or is not registered at all).

raftmeta keeps a partition whose every replica is MIGRATING as an empty tuple, and writes it as
an empty list: Kafka reads an empty (or all-MIGRATING) list as MIGRATING for every replica
(``PartitionRegistration.defaultToMigrating``), so the two say the same, and simulated clusters
(no directories) keep records and images as small as before. Pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Final

from raftmeta.api.ids import UUID_BYTES, id_text
from raftmeta.controller.image import BrokerRegistration, MetadataImage, PartitionRegistration

MIGRATING: Final = bytes(UUID_BYTES)
UNASSIGNED: Final = bytes(UUID_BYTES - 1) + b"\x01"
LOST: Final = bytes(UUID_BYTES - 1) + b"\x02"
# Kafka's DirectoryId.reserved: the first 100 uuids are never a real directory's.
RESERVED_BELOW: Final = 100


def is_reserved(directory: bytes) -> bool:
    """Kafka's ``DirectoryId.reserved``: most significant bits 0 and least below 100."""
    return len(directory) == UUID_BYTES and int.from_bytes(directory, "big") < RESERVED_BELOW


def normalized(directories: Iterable[bytes]) -> tuple[bytes, ...]:
    """``directories`` as a partition keeps them: empty when every one is MIGRATING."""
    found = tuple(directories)
    return () if all(d == MIGRATING for d in found) else found


def replica_directories(part: PartitionRegistration) -> tuple[bytes, ...]:
    """Every replica's directory, in replica order (MIGRATING for a partition that keeps none)."""
    return part.directories or (MIGRATING,) * len(part.replicas)


def default_dir(image: MetadataImage, broker_id: int) -> bytes:
    """Kafka's ``ClusterControlManager.defaultDir``: the directory a new replica on ``broker_id``
    starts in."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return UNASSIGNED
    if not broker.log_dirs:
        return MIGRATING
    if len(broker.log_dirs) == 1:
        return broker.log_dirs[0]
    return UNASSIGNED


def new_directories(image: MetadataImage, replicas: Sequence[int]) -> tuple[bytes, ...]:
    """A new partition's directories (normalized): each replica's broker's default directory."""
    return normalized(default_dir(image, broker) for broker in replicas)


def any_log_dirs(image: MetadataImage) -> bool:
    """Whether any registered broker named log directories (else every new replica is MIGRATING)."""
    return any(broker.log_dirs for broker in image.brokers.values())


def registration_problem(image: MetadataImage, broker_id: int, log_dirs: Sequence[bytes]) -> str | None:
    """Kafka's checks of a registration's LogDirs (``ClusterControlManager.registerBroker``), in
    its order, each the message of an INVALID_REGISTRATION; None when they pass. (Kafka also
    refuses a registration naming none; raftmeta's simulated brokers name none.)"""
    malformed = malformed_dir("log_dirs", log_dirs)
    if malformed is not None:
        return malformed
    if any(is_reserved(d) for d in log_dirs):
        return "Reserved directory ID in request"
    if len(set(log_dirs)) != len(log_dirs):
        return "Duplicate directory ID in request"
    for directory in log_dirs:
        for other in image.brokers.values():
            if other.id != broker_id and directory in other.log_dirs:
                return f"Broker {other.id} is already registered with directory {id_text(directory)}"
    return None


def is_online_dir(broker: BrokerRegistration, directory: bytes) -> bool:
    """Kafka's ``BrokerRegistration.hasOnlineDir`` (``DirectoryId.isOnline``): UNASSIGNED and
    MIGRATING are online, LOST is not; a broker that registered no directories has every one
    online; else the directory must be one it registered."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not broker.log_dirs or directory in broker.log_dirs


def has_online_dir(image: MetadataImage, broker_id: int, directory: bytes) -> bool:
    """Kafka's ``ClusterControlManager.hasOnlineDir``: ``broker_id`` is registered and
    ``directory`` is one of its online ones."""
    broker = image.brokers.get(broker_id)
    return broker is not None and is_online_dir(broker, directory)


def malformed_dir(field: str, directories: Sequence[bytes]) -> str | None:
    """The first directory id of ``directories`` (the request's ``field``) that is not a 16-byte
    uuid, as a message naming it (Kafka's wire format cannot carry one); None when all are."""
    for index, directory in enumerate(directories):
        if len(directory) != UUID_BYTES:
            return f"{field}[{index}]: a directory id is a {UUID_BYTES}-byte uuid, got {len(directory)} bytes"
    return None


def newly_offline(broker: BrokerRegistration, offline: Collection[bytes]) -> tuple[bytes, ...]:
    """Kafka's ``BrokerRegistration.directoryIntersection``: the broker's registered directories
    that ``offline`` names, in registration order. A directory it never registered (another
    broker's, a reserved id) or already left offline is not among them."""
    return tuple(d for d in broker.log_dirs if d in offline)


def online_after(broker: BrokerRegistration, offline: Collection[bytes]) -> tuple[bytes, ...]:
    """Kafka's ``BrokerRegistration.directoryDifference``: the broker's registered directories
    that ``offline`` does not name, in registration order."""
    return tuple(d for d in broker.log_dirs if d not in offline)


def replica_directory(part: PartitionRegistration, broker_id: int) -> bytes | None:
    """The directory of ``broker_id``'s replica of ``part`` (MIGRATING when the partition keeps
    none), or None when the broker holds no replica of it."""
    try:
        index = part.replicas.index(broker_id)
    except ValueError:
        return None
    return part.directories[index] if part.directories else MIGRATING
