"""One admin request's lifecycle in the QuorumController: its states, the transitions allowed
between them (as data, checked on every move), and the offset-keyed table of answers that wait
for the log.

A request the QuorumController cannot answer at once becomes a :class:`Pending`. Where it waits
is its state::

    (submitted) --hold--> HELD --+
        |                        |  (the controller is active and no work is under way)
        +------------------------+--read_index--> READING --confirm--> CONFIRMED --answer--> ANSWERED
                                 +--stage-------> STAGED  --append---> APPENDED  --answer--> ANSWERED
                                 +--append------------------------------^   (a voter change; an answer
                                 |                                            behind an appended batch)
                                 +--work--------> WORKING --stage / append / answer
                                 +--answer------> ANSWERED
    any state but ANSWERED --renounce--> FAILED (NOT_CONTROLLER), and a voter change whose batch is
    below the high watermark --answer--> ANSWERED

* HELD: before the leader's first commit of its epoch, or behind work over several turns.
* READING: a linearizable read (or a client write the image alone answers) waits for its
  read-index round.
* STAGED: its records are in the open batch (or its answer waits behind a batch there).
* WORKING: its work runs over several turns; its answer comes with the last turn.
* APPENDED, CONFIRMED: in the :class:`PendingTable` under the offset whose commit makes the answer
  true (the last offset of its batch; a confirmed read's index minus one).

Kafka's QuorumController keeps the same kind of table (``DeferredEventQueue``: an event completes
when the offset it waits for is committed, and all fail together on renounce); the transitions
are data as in h11's state machine, so an illegal move is a loud error, not a lost answer.
"""

from __future__ import annotations

import heapq
from enum import StrEnum

from google.protobuf.message import Message


# StrEnum: its members hash as their strings (in C), where Enum's hash is a Python call -- a move
# looks up a (state, event) pair once per step of every request.
class State(StrEnum):
    HELD = "held"
    READING = "reading"
    STAGED = "staged"
    WORKING = "working"
    APPENDED = "appended"
    CONFIRMED = "confirmed"
    ANSWERED = "answered"
    FAILED = "failed"


class Event(StrEnum):
    HOLD = "hold"
    READ_INDEX = "read_index"
    STAGE = "stage"
    WORK = "work"
    APPEND = "append"
    CONFIRM = "confirm"
    ANSWER = "answer"
    RENOUNCE = "renounce"


# A request that is not answered at once starts in NEW (never stored: it is only ever the
# state before the first move).
NEW = None

S, E = State, Event
_FROM_HANDLING = {
    E.READ_INDEX: S.READING,
    E.STAGE: S.STAGED,
    E.WORK: S.WORKING,
    E.APPEND: S.APPENDED,
    E.ANSWER: S.ANSWERED,
}
# (state, event) -> the next state. Anything not listed is illegal.
TRANSITIONS: dict[tuple[State | None, Event], State] = {
    (NEW, E.HOLD): S.HELD,
    **{(NEW, event): state for event, state in _FROM_HANDLING.items()},
    **{(S.HELD, event): state for event, state in _FROM_HANDLING.items()},
    (S.READING, E.CONFIRM): S.CONFIRMED,
    (S.CONFIRMED, E.ANSWER): S.ANSWERED,
    (S.STAGED, E.APPEND): S.APPENDED,
    (S.WORKING, E.STAGE): S.STAGED,
    (S.WORKING, E.APPEND): S.APPENDED,
    (S.WORKING, E.ANSWER): S.ANSWERED,
    (S.APPENDED, E.ANSWER): S.ANSWERED,
    **{(state, E.RENOUNCE): S.FAILED for state in (S.HELD, S.READING, S.STAGED, S.WORKING, S.APPENDED, S.CONFIRMED)},
}
del S, E


class IllegalTransitionError(RuntimeError):
    """A request moved in a way its lifecycle does not allow: a bug in the QuorumController."""


class Pending:
    """A request the QuorumController answers later: the driver's ``key``, what it asked, where it
    waits (``state``), and its answer once known (a write's response before its batch commits; a
    read's is made from the image when released, so it stays None)."""

    __slots__ = ("key", "method", "request", "response", "state")

    def __init__(self, key: int, method: str, request: Message) -> None:
        self.key = key
        self.method = method
        self.request = request
        self.response: Message | None = None
        self.state: State | None = NEW

    def move(self, event: Event) -> None:
        state = TRANSITIONS.get((self.state, event))
        if state is None:
            now = "new" if self.state is None else self.state.value
            raise IllegalTransitionError(f"{self.method} (key {self.key}): no transition from {now} on {event.value}")
        self.state = state

    def __repr__(self) -> str:
        state = "new" if self.state is None else self.state.value
        return f"Pending({self.key}, {self.method}, {state})"


class Slot:
    """What waits for one offset: the requests answered once it is applied, and how many of the
    controller's pending batches the log batch ending there holds (0: not this controller's)."""

    __slots__ = ("batches", "offset", "requests")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.batches = 0
        self.requests: list[Pending] = []


class PendingTable:
    """Everything waiting for the log, by offset: one key space for "this batch is ours" and for
    "this answer waits for that offset". Offsets complete in order (``complete_up_to``) or all
    fail together (``take_all``, on renounce)."""

    def __init__(self) -> None:
        self._slots: dict[int, Slot] = {}
        self._offsets: list[int] = []  # a heap of the keys of _slots
        self._own = 0  # slots holding this controller's batches
        self.request_count = 0

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def has_own(self) -> bool:
        """Whether a batch this controller proposed has not been applied yet."""
        return self._own > 0

    def _slot(self, offset: int) -> Slot:
        slot = self._slots.get(offset)
        if slot is None:
            slot = self._slots[offset] = Slot(offset)
            heapq.heappush(self._offsets, offset)
        return slot

    def add(self, offset: int, request: Pending) -> None:
        """``request``'s answer waits for ``offset``."""
        self._slot(offset).requests.append(request)
        self.request_count += 1

    def add_batches(self, offset: int, batches: int) -> None:
        """The log batch ending at ``offset`` holds ``batches`` of the controller's pending batches."""
        slot = self._slot(offset)
        if slot.batches:
            raise ValueError(f"offset {offset} already holds this controller's batches")
        slot.batches = batches
        self._own += 1

    def take_own(self, offset: int) -> int:
        """The controller's batches the log batch ending at ``offset`` holds (0: none), now applied."""
        slot = self._slots.get(offset)
        if slot is None or not slot.batches:
            return 0
        batches, slot.batches = slot.batches, 0
        self._own -= 1
        return batches

    def forget_own(self) -> None:
        """The log was replaced (a snapshot installed): no batch here is known to be ours."""
        for slot in self._slots.values():
            slot.batches = 0
        self._own = 0

    def complete_up_to(self, offset: int) -> list[Slot]:
        """The slots at or below ``offset``, in order, removed from the table."""
        offsets = self._offsets
        done: list[Slot] = []
        while offsets and offsets[0] <= offset:
            slot = self._slots.pop(heapq.heappop(offsets))
            if slot.batches:
                self._own -= 1
            self.request_count -= len(slot.requests)
            done.append(slot)
        return done

    def take_all(self) -> list[Slot]:
        """Every slot, in order, removed from the table."""
        slots = [self._slots[offset] for offset in sorted(self._offsets)]
        self._slots.clear()
        self._offsets.clear()
        self._own = 0
        self.request_count = 0
        return slots
