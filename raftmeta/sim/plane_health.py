"""Whether every partition of an image is back to health, asked after every event of the plane's
liveness phase (``PlaneSimulation._converged``).

The answer for one image is the same every time (images are immutable), and an image shares its
unchanged topics with the one before it (``raftmeta.controller.pmap``), so :class:`HealthWatch`
keeps the last image's answer and each topic's, and judges only the topics a commit replaced.
The rule itself is ``raftmeta.api.health.classify``'s, read through :func:`unhealthy_partitions`.
"""

from __future__ import annotations

from raftmeta.api.health import classify
from raftmeta.controller.image import MetadataImage, TopicImage


def unhealthy_partitions(image: MetadataImage) -> list[str]:
    """Partitions not yet back to health (raftmeta.api.health's rules, every registered broker live):
    under-replicated, or led by another replica than the preferred one."""
    return [name for _, topic in image.topics.iter_items() for name in _unhealthy_in(topic, set(image.brokers))]


def _unhealthy_in(topic: TopicImage, live: set[int]) -> list[str]:
    unhealthy = []
    for pid, p in enumerate(topic.partitions):
        health = classify(p.replicas, p.isr, p.leader, live, adding_replicas=p.adding_replicas)
        if health.under_replicated or health.preferred_leader_away:
            unhealthy.append(f"{topic.name}-{pid}")
    return unhealthy


class HealthWatch:
    """``healthy(image)`` == ``not unhealthy_partitions(image)``, at the cost of what changed."""

    __slots__ = ("_healthy", "_image", "_topics")

    def __init__(self) -> None:
        self._image: MetadataImage | None = None
        self._healthy = False
        # id(topic) -> (the topic, kept so that its id is not reused; whether it is healthy).
        self._topics: dict[int, tuple[TopicImage, bool]] = {}

    def healthy(self, image: MetadataImage) -> bool:
        if image is self._image:
            return self._healthy
        # The two flags read the partition alone (not which brokers are live), so a topic's
        # answer holds for as long as the topic object does.
        live = set(image.brokers)
        known = self._topics
        topics: dict[int, tuple[TopicImage, bool]] = {}
        healthy = True
        for _, topic in image.topics.iter_items():
            entry = known.get(id(topic))
            if entry is None or entry[0] is not topic:
                entry = (topic, not _unhealthy_in(topic, live))
            topics[id(topic)] = entry
            healthy = healthy and entry[1]
        self._image, self._healthy, self._topics = image, healthy, topics
        return healthy
