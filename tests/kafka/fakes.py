"""Canned controller answers for the fake admin path."""

from __future__ import annotations

from raftmeta.v1 import controller_pb2, errors_pb2
from tests.kafka.helpers import FakeAdmin
from tests.kafka.samples import TOPIC_ID


def orders(partitions: int = 3) -> controller_pb2.TopicDescription:
    topic = controller_pb2.TopicDescription(name="orders", topic_id=TOPIC_ID.bytes, configs={"retention.ms": "1000"})
    for p in range(partitions):
        replicas = [p % 6, (p + 1) % 6]
        topic.partitions.add(partition=p, leader=replicas[0], leader_epoch=1, replicas=replicas, isr=replicas)
    return topic


def fleet(fenced: tuple[int, ...] = (4,)) -> controller_pb2.DescribeClusterResponse:
    """Six simulated brokers 0..5 on racks r0..r2; those in ``fenced`` are fenced (not alive)."""
    response = controller_pb2.DescribeClusterResponse(cluster_id="test-cluster-id-000000", controller_id=1)
    for b in range(6):
        response.brokers.add(broker_id=b, rack=f"r{b % 3}", fenced=b in fenced, broker_epoch=10 + b)
    return response


def full_admin() -> FakeAdmin:
    """A fake admin path that answers every method the Kafka handlers use, successfully."""
    admin = FakeAdmin()
    admin.answers = {
        "DescribeCluster": lambda r: fleet(),
        "DescribeTopics": lambda r: controller_pb2.DescribeTopicsResponse(
            topics=[orders()]
            if not r.topics or "orders" in r.topics
            else [
                controller_pb2.TopicDescription(name=n, error_code=errors_pb2.UNKNOWN_TOPIC_OR_PARTITION)
                for n in r.topics
            ]
        ),
        "CreateTopics": lambda r: controller_pb2.CreateTopicsResponse(
            topics=[
                controller_pb2.CreatableTopicResult(
                    name=t.name,
                    topic_id=b"" if r.validate_only else TOPIC_ID.bytes,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=dict(t.configs),
                )
                for t in r.topics
            ]
        ),
        "DeleteTopics": lambda r: controller_pb2.DeleteTopicsResponse(
            responses=[controller_pb2.DeletableTopicResult(name=n, topic_id=TOPIC_ID.bytes) for n in r.topic_names]
        ),
        "CreatePartitions": lambda r: controller_pb2.CreatePartitionsResponse(
            results=[controller_pb2.CreatePartitionsTopicResult(name=t.name) for t in r.topics]
        ),
        "DescribeConfigs": lambda r: controller_pb2.DescribeConfigsResponse(
            results=[
                controller_pb2.DescribeConfigsResult(
                    topic=t,
                    configs=[
                        controller_pb2.ConfigEntry(name="cleanup.policy", value="delete", is_default=True),
                        controller_pb2.ConfigEntry(name="retention.ms", value="1000"),
                    ],
                )
                for t in r.topics
            ]
        ),
        "IncrementalAlterConfigs": lambda r: controller_pb2.IncrementalAlterConfigsResponse(
            results=[controller_pb2.AlterConfigsResult(topic=t.topic) for t in r.topics]
        ),
        "ElectLeaders": lambda r: controller_pb2.ElectLeadersResponse(
            results=[
                controller_pb2.TopicElectionResult(
                    topic=t.topic,
                    partitions=[
                        controller_pb2.PartitionElectionResult(partition=p, error_code=errors_pb2.ELECTION_NOT_NEEDED)
                        for p in t.partitions
                    ],
                )
                for t in r.topic_partitions
            ]
        ),
        "AlterPartitionReassignments": lambda r: controller_pb2.AlterPartitionReassignmentsResponse(
            results=[
                controller_pb2.ReassignableTopicResult(
                    name=t.name,
                    partitions=[
                        controller_pb2.ReassignablePartitionResult(partition_index=p.partition_index)
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ]
        ),
        "ListPartitionReassignments": lambda r: controller_pb2.ListPartitionReassignmentsResponse(
            topics=[
                controller_pb2.OngoingTopicReassignment(
                    name="orders",
                    partitions=[
                        controller_pb2.OngoingPartitionReassignment(
                            partition_index=0, replicas=[3, 4, 0], adding_replicas=[3, 4], removing_replicas=[0]
                        )
                    ],
                )
            ]
        ),
        "AddRaftVoter": lambda r: controller_pb2.AddRaftVoterResponse(),
        "RegisterBroker": lambda r: controller_pb2.RegisterBrokerResponse(broker_epoch=10),
        "BrokerHeartbeat": lambda r: controller_pb2.BrokerHeartbeatResponse(is_caught_up=True),
        "AllocateProducerIds": lambda r: controller_pb2.AllocateProducerIdsResponse(
            producer_id_start=3000, producer_id_len=1000
        ),
        "AlterPartition": lambda r: controller_pb2.AlterPartitionResponse(
            topics=[
                controller_pb2.AlterPartitionTopicResult(
                    topic_id=t.topic_id,
                    partitions=[
                        controller_pb2.AlterPartitionPartitionResult(
                            partition_index=p.partition_index,
                            leader_id=r.broker_id,
                            leader_epoch=p.leader_epoch,
                            partition_epoch=p.partition_epoch + 1,
                            isr=[b.broker_id for b in p.new_isr_with_epochs],
                        )
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ]
        ),
        "AssignReplicasToDirs": lambda r: controller_pb2.AssignReplicasToDirsResponse(
            directories=[
                controller_pb2.AssignReplicasDirectoryResult(
                    id=d.id,
                    topics=[
                        controller_pb2.AssignReplicasTopicResult(
                            topic_id=t.topic_id,
                            partitions=[
                                controller_pb2.AssignReplicasPartitionResult(partition_index=p) for p in t.partitions
                            ],
                        )
                        for t in d.topics
                    ],
                )
                for d in r.directories
            ]
        ),
        "RemoveRaftVoter": lambda r: controller_pb2.RemoveRaftVoterResponse(
            error_code=errors_pb2.VOTER_NOT_FOUND, error_message="no voter 4"
        ),
        "DescribeQuorum": lambda r: controller_pb2.DescribeQuorumResponse(
            cluster_id="c",
            leader_id=2,
            leader_epoch=4,
            high_watermark=100,
            voters=[
                controller_pb2.QuorumReplicaState(
                    replica_id=1, log_end_offset=100, last_fetch_ms_ago=10, last_caught_up_ms_ago=20
                ),
                controller_pb2.QuorumReplicaState(
                    replica_id=2, log_end_offset=100, last_fetch_ms_ago=0, last_caught_up_ms_ago=0
                ),
                controller_pb2.QuorumReplicaState(
                    replica_id=3, log_end_offset=90, last_fetch_ms_ago=-1, last_caught_up_ms_ago=-1
                ),
            ],
        ),
    }
    return admin
