"""What kafka-metadata-shell prints, read back (raftmeta/kraft/metadata_shell.py) without a JVM:
its ``tree /image`` output into topics, partitions, brokers and the image's provenance; a line
that is not what the shell prints is refused by name. tests/kraft/test_export_kafka_tools.py
runs the shell itself."""

from __future__ import annotations

import pytest

from raftmeta.kraft.metadata_shell import (
    ShellBroker,
    ShellOutputError,
    ShellPartition,
    _provenance_offset,
    _shell_image,
    faults,
    parse_broker,
    parse_partition,
    parse_tree,
)

# The shape of `tree /image` as the shell printed it for an exported snapshot (trimmed).
TREE = """\
acls:
  byId:
cluster:
  brokers:
    0:
      BrokerRegistration(id=0, epoch=1, incarnationId=MjIyMjIyMjIyMjIyMjIyMg, listeners=[Endpoint(listenerName='PLAINTEXT', securityProtocol=PLAINTEXT, host='127.0.0.1', port=9100)], supportedFeatures={}, rack=Optional[rack-0], fenced=false, inControlledShutdown=false, isMigratingZkBroker=false, directories=[], cordonedDirectories=null)
    2:
      BrokerRegistration(id=2, epoch=3, incarnationId=NDQ0NDQ0NDQ0NDQ0NDQ0NA, listeners=[], supportedFeatures={}, rack=Optional.empty, fenced=true, inControlledShutdown=false, isMigratingZkBroker=false, directories=[], cordonedDirectories=null)
  controllers:
configs:
  TOPIC:t1:
    retention.ms:
      1000
provenance:
  offset 11, epoch 1, time 2023-11-14T22:13:20.5Z[UTC]
topics:
  byName:
    t1:
      0:
        PartitionRegistration(replicas=[0, 1], directories=[AAAAAAAAAAAAAAAAAAAAAA, AAAAAAAAAAAAAAAAAAAAAA], isr=[0], removingReplicas=[], addingReplicas=[], elr=[], lastKnownElr=[], leader=0, leaderRecoveryState=RECOVERED, leaderEpoch=2, partitionEpoch=5)
      id:
        AQIDBAUGBwgJCgsMDQ4PEA
      name:
        t1
    empty:
      id:
        AQIDBAUGBwgJCgsMDQ4PEQ
"""  # noqa: E501 - the shell's lines as it prints them


def test_the_tree_reads_into_topics_partitions_brokers_and_provenance() -> None:
    image = parse_tree(TREE)
    assert _provenance_offset(image) == 11
    shown = _shell_image(image, "")
    assert shown.topics == {"t1": {0: ShellPartition((0, 1), (0,), 0, 2, 5)}, "empty": {}}
    assert shown.brokers == {0: ShellBroker(0, 1, "rack-0", False), 2: ShellBroker(2, 3, None, True)}


@pytest.mark.parametrize(
    "line", ["cat: /image/topics/byName/t/0: No such file or directory.", "PartitionRegistration()"]
)
def test_a_line_that_is_no_partition_is_refused_by_name(line: str) -> None:
    with pytest.raises(ShellOutputError, match="not a PartitionRegistration"):
        parse_partition(line)
    with pytest.raises(ShellOutputError, match="not a BrokerRegistration"):
        parse_broker(line)


def test_faults_are_the_shells_load_errors_not_its_ignored_control_records() -> None:
    stderr = (
        "[t] ERROR Ignoring control record with type SNAPSHOT_HEADER at offset 0 (SnapshotFileReader)\n"
        "[t] ERROR Encountered shell fault: Error loading metadata log record from offset 3 (LoggingFaultHandler)\n"
        "java.lang.IllegalArgumentException: Unsupported metadata version\n"
    )
    assert faults(stderr) == stderr.splitlines()[1:]
