"""The Kafka APIs this listener serves and their versions, as ApiVersions advertises them.

Each range is what the handler in :mod:`raftmeta.kafka.dispatch` has been tested at, within what
kio generates (Kafka 4's schemas). A request outside its range is refused as a broker does
(framing.UnsupportedVersion)."""

from __future__ import annotations

from typing import Final

API_VERSIONS_KEY: Final = 18

# api key → (min version, max version)
SUPPORTED: Final[dict[int, tuple[int, int]]] = {
    1: (4, 18),  # Fetch (of __cluster_metadata, from brokers as observers: as a KRaft controller)
    3: (0, 12),  # Metadata
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs (legacy: replaces a resource's configs)
    35: (1, 5),  # DescribeLogDirs
    37: (0, 3),  # CreatePartitions
    43: (0, 2),  # ElectLeaders
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    55: (0, 2),  # DescribeQuorum
    56: (2, 3),  # AlterPartition (from partition leaders: brokers)
    59: (0, 1),  # FetchSnapshot (of __cluster_metadata, from brokers as observers)
    60: (0, 2),  # DescribeCluster
    62: (0, 4),  # BrokerRegistration (brokers)
    63: (0, 2),  # BrokerHeartbeat (brokers)
    75: (0, 0),  # DescribeTopicPartitions
    80: (0, 0),  # AddRaftVoter
    81: (0, 0),  # RemoveRaftVoter
}
