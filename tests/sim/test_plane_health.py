"""The plane's liveness check asks after every event whether every partition is back to health;
``HealthWatch`` answers from what changed since the last image and must agree with the full scan."""

from __future__ import annotations

import dataclasses

from raftmeta.controller.image import MetadataImage, PartitionRegistration, TopicImage
from raftmeta.controller.pmap import PMap
from raftmeta.sim.plane_health import HealthWatch, unhealthy_partitions

HEALTHY = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=0, partition_epoch=0)


def topic(name: str, *partitions: PartitionRegistration) -> TopicImage:
    return TopicImage(name, name.encode(), tuple(partitions), {})


def with_topic(image: MetadataImage, changed: TopicImage) -> MetadataImage:
    return dataclasses.replace(image, topics=image.topics.set(changed.topic_id, changed))


def test_the_watch_judges_again_only_what_a_commit_changed_and_agrees_with_the_full_scan() -> None:
    watch = HealthWatch()
    image = MetadataImage(topics=PMap({b"a": topic("a", HEALTHY, HEALTHY), b"b": topic("b", HEALTHY)}))
    shrunk = HEALTHY._replace(isr=(1, 2))
    moved = HEALTHY._replace(leader=2)
    images = [
        image,
        with_topic(image, topic("b", HEALTHY, shrunk)),  # under-replicated
        with_topic(image, topic("b", HEALTHY, HEALTHY)),  # grown, healthy again
        with_topic(image, topic("a", moved, HEALTHY)),  # led away from the preferred replica
        image,  # back to the first image's topics
    ]
    expected = [True, False, True, False, True]
    for i, (each, healthy) in enumerate(zip(images, expected, strict=True)):
        assert (len(unhealthy_partitions(each)) == 0) is healthy, i
        assert watch.healthy(each) is healthy, i
        assert watch.healthy(each) is healthy, f"{i}: asked again about the same image"
    assert unhealthy_partitions(images[1]) == ["b-1"] and unhealthy_partitions(images[3]) == ["a-0"]
