"""Partition leader election in one place: Kafka's ``PartitionChangeBuilder`` (without ELR).

Every change to a partition -- a broker fenced or unfenced, a preferred-leader election -- is
expressed as a *target* (ISR, replicas, election type) and turned into at most one
``PartitionChangeRecord`` here, so the rules cannot drift apart between callers:

- A **valid leader** is in the target ISR and acceptable (unfenced, and not the broker being
  removed; and, given the ``image``, its replica's directory is one of its broker's online
  ones: Kafka's ``LeaderAcceptor``, so a replica in a failed directory never leads, not even by an
  unclean election). ONLINE election keeps a valid current leader, else takes the first valid replica in
  replica order. PREFERRED election takes the first replica if valid, else keeps a valid current
  leader, else the first valid replica. UNCLEAN election (the topic's or the cluster default's
  ``unclean.leader.election.enable``) is ONLINE, then, if no valid leader exists, the first
  acceptable replica in replica order: the ISR becomes just that broker and the record says
  ``unclean_election`` -- data loss is possible (seed 002).
- With no valid leader the leader becomes -1. An empty target ISR is never written: the ISR keeps
  its last member, so that broker can lead again when it returns (Kafka's rule without ELR).
- The record carries the resulting epochs, as Kafka's ``PartitionRegistration.merge`` makes them:
  partition epoch + 1 on every change; leader epoch + 1 when the record names a leader, which it
  does when the leader changes and -- Kafka's ``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``
  -- when a replica leaves the replica set under the same leader (a finished or cancelled move), so
  the removed replica's fetches are fenced. ``build()`` returns None when nothing would change.
- **Reassignment** (KIP-455, Kafka's ``completeReassignmentIfNeeded``): while a partition has
  adding or removing replicas, every build checks whether the move can complete -- every adding
  replica is in the target ISR and the ISR keeps a member once the removing replicas leave it. If
  so, the same record sets replicas = target (replicas - removing), drops the removing replicas
  from the ISR (which then follows the new replica order) and clears adding/removing; a removed
  leader is then no longer valid, so the election picks the first in-sync target replica.
- **Directories** (KIP-858, Kafka's ``setAssignmentChanges``): each target replica keeps its
  directory (or the one :meth:`PartitionChangeBuilder.set_directory` gives it); a replica new to
  the partition gets its broker's default directory in the ``image`` (see directories.py). The
  record carries the list when it differs from the partition's.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence

from raftmeta.controller import directories as dirs
from raftmeta.controller.directories import MIGRATING, normalized, replica_directories
from raftmeta.controller.image import NO_LEADER, MetadataImage, PartitionRegistration
from raftmeta.v1 import records_pb2


def _no_default_dir(broker: int) -> bytes:
    # Kafka's builder fails the same way: only a change that adds replicas needs a default
    # directory, and its caller must say where new replicas go.
    raise RuntimeError(f"replica {broker} is new to the partition, and no default directory provider was given")


def _in_online_dir(
    partition: PartitionRegistration, acceptable: Callable[[int], bool], image: MetadataImage
) -> Callable[[int], bool]:
    """Kafka's ``LeaderAcceptor``: ``acceptable``, and the broker's replica of ``partition`` is in
    one of its online directories in ``image``."""
    directories = dict(zip(partition.replicas, partition.directories, strict=True))

    def accept(broker: int) -> bool:
        return acceptable(broker) and dirs.has_online_dir(image, broker, directories.get(broker, MIGRATING))

    return accept


class Election(enum.Enum):
    ONLINE = "online"
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


class PartitionChangeBuilder:
    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: bytes,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        *,
        election: Election = Election.ONLINE,
        image: MetadataImage | None = None,
        default_dir: Callable[[int], bytes] | None = None,
    ) -> None:
        """``image``, the image the change is judged against (every controller rule passes it), gives
        the directory rules: a leader's replica is in an online directory, a new replica goes to its
        broker's default one. ``default_dir`` overrides the latter (tests of the builder alone)."""
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.is_acceptable_leader = is_acceptable_leader
        if image is not None and partition.directories:
            # Only a partition that keeps directories can have a replica in an offline one (every
            # MIGRATING directory is online): the others, all of the simulated brokers', pay nothing.
            self.is_acceptable_leader = _in_online_dir(partition, is_acceptable_leader, image)
        self.election = election
        self.target_isr: tuple[int, ...] = partition.isr
        self.target_replicas: tuple[int, ...] = partition.replicas
        self.target_adding: tuple[int, ...] = partition.adding_replicas
        self.target_removing: tuple[int, ...] = partition.removing_replicas
        if default_dir is None:
            default_dir = _no_default_dir if image is None else functools.partial(dirs.default_dir, image)
        self.default_dir = default_dir
        self.target_directories: dict[int, bytes] = dict(
            zip(partition.replicas, replica_directories(partition), strict=True)
        )

    @classmethod
    def in_image(
        cls,
        image: MetadataImage,
        partition: PartitionRegistration,
        topic_id: bytes,
        partition_id: int,
        *,
        election: Election = Election.ONLINE,
    ) -> PartitionChangeBuilder:
        """A change judged by ``image`` alone, as most controller rules make one: a leader is an
        unfenced broker whose replica's directory is online. Rules that also exclude a broker
        (fencing, a failed directory) pass their own ``is_acceptable_leader`` to the constructor."""
        return cls(partition, topic_id, partition_id, image.is_unfenced, election=election, image=image)

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self.target_replicas = tuple(replicas)
        return self

    def set_target_adding(self, adding: Sequence[int]) -> PartitionChangeBuilder:
        self.target_adding = tuple(adding)
        return self

    def set_target_removing(self, removing: Sequence[int]) -> PartitionChangeBuilder:
        self.target_removing = tuple(removing)
        return self

    def set_directory(self, broker: int, directory: bytes) -> PartitionChangeBuilder:
        """The replica on ``broker`` lives in ``directory`` (AssignReplicasToDirs)."""
        self.target_directories[broker] = directory
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self.election = election
        return self

    # ---- reassignment ---------------------------------------------------------------------------
    def _complete_reassignment_if_needed(self) -> None:
        """Kafka's ``PartitionReassignmentReplicas.maybeCompleteReassignment`` on the targets."""
        adding, removing = self.target_adding, self.target_removing
        if not adding and not removing:
            return
        if not set(adding).issubset(self.target_isr):
            return
        remaining_isr = tuple(b for b in self.target_isr if b not in removing)
        if not remaining_isr:  # completing would leave no in-sync replica: wait
            return
        self.target_replicas = tuple(b for b in self.target_replicas if b not in removing)
        # A finished move reads like a new partition: the ISR in the order of the new replicas.
        in_sync = set(remaining_isr)
        self.target_isr = tuple(b for b in self.target_replicas if b in in_sync)
        self.target_adding = ()
        self.target_removing = ()

    # ---- election -------------------------------------------------------------------------------
    def _is_valid_leader(self, broker: int) -> bool:
        return broker in self.target_isr and self.is_acceptable_leader(broker)

    def elect_leader(self) -> tuple[int, bool]:
        """(new leader or -1, whether the election was unclean)."""
        current = self.partition.leader
        replicas = self.target_replicas
        if self.election is Election.PREFERRED:
            if replicas and self._is_valid_leader(replicas[0]):
                return replicas[0], False
            if current != NO_LEADER and self._is_valid_leader(current):
                return current, False
            for broker in replicas[1:]:
                if self._is_valid_leader(broker):
                    return broker, False
            return NO_LEADER, False
        if current != NO_LEADER and self._is_valid_leader(current):
            return current, False
        for broker in replicas:
            if self._is_valid_leader(broker):
                return broker, False
        if self.election is Election.UNCLEAN:
            for broker in replicas:
                if self.is_acceptable_leader(broker):
                    return broker, True
        return NO_LEADER, False

    # ---- record ---------------------------------------------------------------------------------
    def build(self) -> records_pb2.MetadataRecord | None:
        """The one record this change needs, or None if the partition would not change."""
        part = self.partition
        change = records_pb2.PartitionChangeRecord(topic_id=self.topic_id, partition_id=self.partition_id)
        self._complete_reassignment_if_needed()
        leader, unclean = self.elect_leader()
        new_isr: tuple[int, ...] | None = None
        leader_changed = leader != part.leader
        if leader_changed:
            change.leader = leader
            if unclean:
                # The new leader was not in sync: the ISR restarts from it alone.
                new_isr = (leader,)
                change.unclean_election = True
        elif not set(part.replicas) <= set(self.target_replicas):
            change.leader = leader  # a replica leaves: the same leader, a new leader epoch (Kafka's rule)
        if new_isr is None and self.target_isr and self.target_isr != part.isr:
            new_isr = self.target_isr
        if new_isr is not None:
            change.isr.ids.extend(new_isr)
        if self.target_replicas != part.replicas:
            change.replicas.ids.extend(self.target_replicas)
        directories = normalized(
            self.target_directories[b] if b in self.target_directories else self.default_dir(b)
            for b in self.target_replicas
        )
        # Compared as kept (all MIGRATING = ()): a replica list that changes while every
        # directory stays MIGRATING needs no list, as Kafka's merge reads an absent one.
        directories_changed = directories != part.directories
        if directories_changed:
            change.directories.SetInParent()
            change.directories.ids.extend(directories or (MIGRATING,) * len(self.target_replicas))
        # Present-but-empty lists are meaningful: they end a reassignment.
        adding_changed = self.target_adding != part.adding_replicas
        removing_changed = self.target_removing != part.removing_replicas
        if adding_changed:
            change.adding_replicas.SetInParent()
            change.adding_replicas.ids.extend(self.target_adding)
        if removing_changed:
            change.removing_replicas.SetInParent()
            change.removing_replicas.ids.extend(self.target_removing)
        if not (
            leader_changed
            or new_isr is not None
            or self.target_replicas != part.replicas
            or adding_changed
            or removing_changed
            or directories_changed
        ):
            return None
        change.leader_epoch = part.leader_epoch + (1 if change.HasField("leader") else 0)
        change.partition_epoch = part.partition_epoch + 1
        return records_pb2.MetadataRecord(partition_change=change)
