"""The field tables of Kafka's metadata records and KRaft's control records, as the pinned
Kafka release (4.4.0) defines them: our own data, written field by field from the JSON schemas
in Kafka's ``metadata/src/main/resources/common/metadata/`` (metadata records, by api key) and
``clients/src/main/resources/common/message/`` (the control records' messages).

A record type, a version or a tagged field not listed here is carried undecoded, never
dropped (raftmeta/records/kafka/frames.py).
"""

from __future__ import annotations

from raftmeta.records.kafka.schema import MessageSchema, f, message

_ENDPOINT = (
    f("Name", "string", "0+"),
    f("Host", "string", "0+"),
    f("Port", "uint16", "0+"),
    f("SecurityProtocol", "int16", "0+"),
)
_FEATURE = (
    f("Name", "string", "0+"),
    f("MinSupportedVersion", "int16", "0+"),
    f("MaxSupportedVersion", "int16", "0+"),
)

_METADATA: tuple[MessageSchema, ...] = (
    message("RegisterBrokerRecord", 0, "0-4", (
        f("BrokerId", "int32", "0+"),
        f("IsMigratingZkBroker", "bool", "2+", default="false"),
        f("IncarnationId", "uuid", "0+"),
        f("BrokerEpoch", "int64", "0+"),
        f("EndPoints", "[]BrokerEndpoint", "0+", fields=_ENDPOINT),
        f("Features", "[]BrokerFeature", "0+", fields=_FEATURE),
        f("Rack", "string", "0+", nullable="0+"),
        f("Fenced", "bool", "0+", default="true"),
        f("InControlledShutdown", "bool", "1+", default="false"),
        f("LogDirs", "[]uuid", "3+", tag=0, tagged="3+"),
        f("CordonedLogDirs", "[]uuid", "4+", nullable="4+", tag=1, tagged="4+", default="null"),
    )),
    message("UnregisterBrokerRecord", 1, "0", (
        f("BrokerId", "int32", "0+"),
        f("BrokerEpoch", "int64", "0+"),
    )),
    message("TopicRecord", 2, "0", (
        f("Name", "string", "0+"),
        f("TopicId", "uuid", "0+"),
    )),
    message("PartitionRecord", 3, "0-2", (
        f("PartitionId", "int32", "0+", default="-1"),
        f("TopicId", "uuid", "0+"),
        f("Replicas", "[]int32", "0+"),
        f("Isr", "[]int32", "0+"),
        f("RemovingReplicas", "[]int32", "0+"),
        f("AddingReplicas", "[]int32", "0+"),
        f("Leader", "int32", "0+", default="-1"),
        f("LeaderRecoveryState", "int8", "0+", tag=0, tagged="0+", default="0"),
        f("LeaderEpoch", "int32", "0+", default="-1"),
        f("PartitionEpoch", "int32", "0+", default="-1"),
        f("Directories", "[]uuid", "1+"),
        f("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, tagged="2+", default="null"),
        f("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2, tagged="2+", default="null"),
    )),
    message("ConfigRecord", 4, "0", (
        f("ResourceType", "int8", "0+"),
        f("ResourceName", "string", "0+"),
        f("Name", "string", "0+"),
        f("Value", "string", "0+", nullable="0+"),
    )),
    message("PartitionChangeRecord", 5, "0-2", (
        f("PartitionId", "int32", "0+", default="-1"),
        f("TopicId", "uuid", "0+"),
        f("Isr", "[]int32", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
        f("Leader", "int32", "0+", tag=1, tagged="0+", default="-2"),
        f("Replicas", "[]int32", "0+", nullable="0+", tag=2, tagged="0+", default="null"),
        f("RemovingReplicas", "[]int32", "0+", nullable="0+", tag=3, tagged="0+", default="null"),
        f("AddingReplicas", "[]int32", "0+", nullable="0+", tag=4, tagged="0+", default="null"),
        f("LeaderRecoveryState", "int8", "0+", tag=5, tagged="0+", default="-1"),
        f("Directories", "[]uuid", "1+", nullable="1+", tag=8, tagged="1+", default="null"),
        f("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, tagged="2+", default="null"),
        f("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7, tagged="2+", default="null"),
    )),
    message("FenceBrokerRecord", 7, "0", (
        f("Id", "int32", "0+"),
        f("Epoch", "int64", "0+"),
    )),
    message("UnfenceBrokerRecord", 8, "0", (
        f("Id", "int32", "0+"),
        f("Epoch", "int64", "0+"),
    )),
    message("RemoveTopicRecord", 9, "0", (f("TopicId", "uuid", "0+"),)),
    message("DelegationTokenRecord", 10, "0", (
        f("Owner", "string", "0+"),
        f("Requester", "string", "0+"),
        f("Renewers", "[]string", "0+"),
        f("IssueTimestamp", "int64", "0+"),
        f("MaxTimestamp", "int64", "0+"),
        f("ExpirationTimestamp", "int64", "0+"),
        f("TokenId", "string", "0+"),
    )),
    message("UserScramCredentialRecord", 11, "0", (
        f("Name", "string", "0+"),
        f("Mechanism", "int8", "0+"),
        f("Salt", "bytes", "0+"),
        f("StoredKey", "bytes", "0+"),
        f("ServerKey", "bytes", "0+"),
        f("Iterations", "int32", "0+"),
    )),
    message("FeatureLevelRecord", 12, "0", (
        f("Name", "string", "0+"),
        f("FeatureLevel", "int16", "0+"),
    )),
    message("ClientQuotaRecord", 14, "0", (
        f("Entity", "[]EntityData", "0+", fields=(
            f("EntityType", "string", "0+"),
            f("EntityName", "string", "0+", nullable="0+"),
        )),
        f("Key", "string", "0+"),
        f("Value", "float64", "0+"),
        f("Remove", "bool", "0+"),
    )),
    message("ProducerIdsRecord", 15, "0", (
        f("BrokerId", "int32", "0+"),
        f("BrokerEpoch", "int64", "0+", default="-1"),
        f("NextProducerId", "int64", "0+"),
    )),
    message("BrokerRegistrationChangeRecord", 17, "0-3", (
        f("BrokerId", "int32", "0+"),
        f("BrokerEpoch", "int64", "0+"),
        f("Fenced", "int8", "0+", tag=0, tagged="0+"),
        f("InControlledShutdown", "int8", "1+", tag=1, tagged="1+"),
        f("LogDirs", "[]uuid", "2+", tag=2, tagged="2+"),
        f("CordonedLogDirs", "[]uuid", "3+", nullable="3+", tag=3, tagged="3+", default="null"),
    )),
    message("AccessControlEntryRecord", 18, "0", (
        f("Id", "uuid", "0+"),
        f("ResourceType", "int8", "0+"),
        f("ResourceName", "string", "0+"),
        f("PatternType", "int8", "0+"),
        f("Principal", "string", "0+"),
        f("Host", "string", "0+"),
        f("Operation", "int8", "0+"),
        f("PermissionType", "int8", "0+"),
    )),
    message("RemoveAccessControlEntryRecord", 19, "0", (f("Id", "uuid", "0+"),)),
    message("NoOpRecord", 20, "0", ()),
    message("ZkMigrationStateRecord", 21, "0", (f("ZkMigrationState", "int8", "0+"),)),
    message("RemoveUserScramCredentialRecord", 22, "0", (
        f("Name", "string", "0+"),
        f("Mechanism", "int8", "0+"),
    )),
    message("BeginTransactionRecord", 23, "0", (
        f("Name", "string", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
    )),
    message("EndTransactionRecord", 24, "0", ()),
    message("AbortTransactionRecord", 25, "0", (
        f("Reason", "string", "0+", nullable="0+", tag=0, tagged="0+", default="null"),
    )),
    message("RemoveDelegationTokenRecord", 26, "0", (f("TokenId", "string", "0+"),)),
    message("RegisterControllerRecord", 27, "0", (
        f("ControllerId", "int32", "0+"),
        f("IncarnationId", "uuid", "0+"),
        f("ZkMigrationReady", "bool", "0+"),
        f("EndPoints", "[]ControllerEndpoint", "0+", fields=_ENDPOINT),
        f("Features", "[]ControllerFeature", "0+", fields=_FEATURE),
    )),
    message("ClearElrRecord", 28, "0", (f("TopicName", "string", "0+"),)),
    message("UnregisterControllerRecord", 29, "0", (f("ControllerId", "int32", "0+"),)),
)  # fmt: skip

# Metadata records by api key (the ``type`` of an ApiMessageAndVersion frame).
METADATA_RECORDS: dict[int, MessageSchema] = {s.api_key: s for s in _METADATA if s.api_key is not None}
METADATA_RECORD_NAMES: dict[str, int] = {s.name: key for key, s in METADATA_RECORDS.items()}

_VOTER = (
    f("VoterId", "int32", "0+"),
    f("VoterDirectoryId", "uuid", "1+"),
)

# KRaft's control record types (the ``type`` in a control record's key) and their messages.
LEADER_CHANGE = 2
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5
KRAFT_VOTERS = 6
CONTROL_RECORDS: dict[int, MessageSchema] = {
    LEADER_CHANGE: message("LeaderChangeMessage", None, "0-1", (
        f("Version", "int16", "0+"),
        f("LeaderId", "int32", "0+"),
        f("Voters", "[]Voter", "0+", fields=_VOTER),
        f("GrantingVoters", "[]Voter", "0+", fields=_VOTER),
    )),
    SNAPSHOT_HEADER: message("SnapshotHeaderRecord", None, "0", (
        f("Version", "int16", "0+"),
        f("LastContainedLogTimestamp", "int64", "0+"),
    )),
    SNAPSHOT_FOOTER: message("SnapshotFooterRecord", None, "0", (f("Version", "int16", "0+"),)),
    KRAFT_VERSION: message("KRaftVersionRecord", None, "0", (
        f("Version", "int16", "0+"),
        f("KRaftVersion", "int16", "0+"),
    )),
    KRAFT_VOTERS: message("VotersRecord", None, "0", (
        f("Version", "int16", "0+"),
        f("Voters", "[]Voter", "0+", fields=(
            f("VoterId", "int32", "0+"),
            f("VoterDirectoryId", "uuid", "0+"),
            f("Endpoints", "[]Endpoint", "0+", fields=(
                f("Name", "string", "0+"),
                f("Host", "string", "0+"),
                f("Port", "uint16", "0+"),
            )),
            f("KRaftVersionFeature", "KRaftVersionFeature", "0+", fields=(
                f("MinSupportedVersion", "int16", "0+"),
                f("MaxSupportedVersion", "int16", "0+"),
            )),
        )),
    )),
}  # fmt: skip
# The transaction markers a data partition holds (never a metadata log): named, not decoded.
CONTROL_RECORD_NAMES: dict[int, str] = {
    0: "AbortMarker",
    1: "CommitMarker",
    **{key: s.name for key, s in CONTROL_RECORDS.items()},
}
