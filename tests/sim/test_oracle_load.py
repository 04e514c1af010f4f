"""The oracle's committed-log rules going on from a snapshot's image (a tape with a gap): every
partition's state taken from the image, whatever else the image's partitions carry (KIP-858's
directories, which no rule of the oracle judges)."""

from __future__ import annotations

from collections import Counter

from raftmeta.controller.assign_dirs import assign_replicas_to_dirs
from raftmeta.controller.brokers import register_broker
from raftmeta.sim.oracle_records import CommittedLogRules
from raftmeta.v1 import controller_pb2, errors_pb2
from tests.controller.helpers import Context, incarnation

DIRECTORY = bytes(15) + b"\x65"


def test_loading_an_image_with_directories_keeps_every_partition() -> None:
    ctx = Context()
    registered = ctx.run(
        register_broker,
        controller_pb2.RegisterBrokerRequest(broker_id=1, incarnation_id=incarnation(1), log_dirs=[DIRECTORY]),
    )
    assert registered.response.error_code == errors_pb2.NONE
    ctx.heartbeat(1)
    topic_id = ctx.create_ok("t", partitions=2, rf=1)
    assert ctx.partition("t", 1).directories == (DIRECTORY,)
    request = controller_pb2.AssignReplicasToDirsRequest(broker_id=1, broker_epoch=ctx.image.brokers[1].epoch)
    request.directories.add(id=DIRECTORY).topics.add(topic_id=topic_id, partitions=[0, 1])
    ctx.run(assign_replicas_to_dirs, request)
    rules = CommittedLogRules(Counter())
    rules.load(ctx.image, 42)
    loaded = rules.topics[topic_id].partitions
    assert [(p.replicas, p.isr, p.leader) for p in loaded] == [((1,), (1,), 1), ((1,), (1,), 1)]
    assert rules.next_offset == 42
