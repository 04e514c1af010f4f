"""placement: Kafka-exact replica placers, manual assignments, broker pools, consumer assignors
and balance metrics. Pure: no IO, no clock, no hidden randomness (random sources are passed in).

The API (DESIGN §6b): ``RandomSource``/``JavaRandom``; ``UsableBroker``;
``StripedReplicaPlacer`` (KRaft), ``assign_replicas_to_brokers``/``add_partitions`` (AdminUtils),
``BalancedReplicaPlacer`` (ours); ``place_replicas`` dispatches by name; errors
``PlacementError`` > ``InvalidReplicationFactorError``, ``InvalidPartitionsError``,
``InvalidReplicaAssignmentError``; ``assign_consumers`` (Kafka's consumer assignors);
``balance_report`` (balance metrics).
"""

from placement.api import DEFAULT_PLACER, PLACERS, place_replicas
from placement.assignors import STRATEGIES, assign_consumers
from placement.balanced import BalancedReplicaPlacer, BrokerLoad
from placement.brokers import UsableBroker
from placement.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    PlacementError,
)
from placement.legacy import add_partitions, assign_replicas_to_brokers, rack_alternated_broker_list
from placement.manual import MANUAL_ASSIGNMENT_PARTITIONS_MAX, parse_replica_assignment, validate_replica_assignment
from placement.metrics import BalanceReport, Spread, TopicBalance, balance_report, perfect_skew, skew
from placement.pools import pool_brokers, pool_names, restrict_to_pool
from placement.rng import JavaRandom, JavaRandomBase, RandomSource, java_shuffle
from placement.striped import StripedReplicaPlacer

__all__ = [
    "DEFAULT_PLACER",
    "MANUAL_ASSIGNMENT_PARTITIONS_MAX",
    "PLACERS",
    "STRATEGIES",
    "BalanceReport",
    "BalancedReplicaPlacer",
    "BrokerLoad",
    "InvalidPartitionsError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "JavaRandom",
    "JavaRandomBase",
    "PlacementError",
    "RandomSource",
    "Spread",
    "StripedReplicaPlacer",
    "TopicBalance",
    "UsableBroker",
    "add_partitions",
    "assign_consumers",
    "assign_replicas_to_brokers",
    "balance_report",
    "java_shuffle",
    "parse_replica_assignment",
    "perfect_skew",
    "place_replicas",
    "pool_brokers",
    "pool_names",
    "rack_alternated_broker_list",
    "restrict_to_pool",
    "skew",
    "validate_replica_assignment",
]
