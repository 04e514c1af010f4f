"""The errors every placer raises: one family, with Kafka's exception names and messages.

The controller maps them to Kafka's error codes: ``InvalidReplicationFactorError`` ->
INVALID_REPLICATION_FACTOR, ``InvalidPartitionsError`` -> INVALID_PARTITIONS,
``InvalidReplicaAssignmentError`` -> INVALID_REPLICA_ASSIGNMENT, any other ``PlacementError``
(Kafka's AdminOperationException, e.g. incomplete rack information) -> INVALID_REQUEST.
"""

from __future__ import annotations


class PlacementError(ValueError):
    """A placement request that cannot be satisfied; ``str(error)`` is the message for the user."""


class InvalidReplicationFactorError(PlacementError):
    """Kafka's InvalidReplicationFactorException."""


class InvalidPartitionsError(PlacementError):
    """Kafka's InvalidPartitionsException."""


class InvalidReplicaAssignmentError(PlacementError):
    """Kafka's InvalidReplicaAssignmentException (a manual assignment breaks a rule)."""
