"""The answers' rules (the answer half of :mod:`raftmeta.sim.oracle`): what a controller may
accept or answer, judged on the image it handled the request on, and what the brokers are told.

Rules: request-digest (as the controller handles a request), heartbeat-epoch, alter-partition,
read-index (as it answers) and broker-fenced-leader (the simulated brokers' side); see the
oracle's docstring.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from raftmeta.api.ids import id_text
from raftmeta.controller.controller import Controller
from raftmeta.controller.image import MetadataImage
from raftmeta.sim.checker import InvariantViolation
from raftmeta.sim.oracle_records import as_text
from raftmeta.v1 import controller_pb2, errors_pb2, records_pb2

UNKNOWN_BROKER_EPOCH = -1  # AlterPartition v3 (KIP-903): an ISR member whose epoch the leader does not know
# The request fields a retry may change (the log format's digest leaves them out): the caller's
# wait, and the id itself.
UNDIGESTED = ("request_id", "timeout_ms")


def digest_of(request: Message) -> bytes:
    """SHA-256 of the request as the log format defines it (deterministic serialization, without
    the fields of ``UNDIGESTED``)."""
    body = type(request)()
    body.CopyFrom(request)
    for name in UNDIGESTED:
        if name in body.DESCRIPTOR.fields_by_name:
            body.ClearField(name)
    return hashlib.sha256(body.SerializeToString(deterministic=True)).digest()


@dataclass(slots=True)
class _Handling:
    """What a controller's ``handle`` saw of one request: the request (kept so its ``id`` stays
    unique while it is here), the controller, its working image, its committed offset."""

    request: Message
    controller: Controller
    image: MetadataImage
    committed_offset: int


class AnswerRules:
    """Let it :meth:`watch` each controller's handling, and tell it of the reads that arrive and
    the answers given (:meth:`arrived`, :meth:`answered`) and of what the brokers read (:meth:`told`)."""

    def __init__(self, checks: Counter[str], last_change_at_or_before: Callable[[int], int]) -> None:
        self.checks = checks  # shared with the committed log's rules: one count per rule
        # The last committed offset at or before an offset whose batch changed the image (read-index).
        self._last_change_at_or_before = last_change_at_or_before
        self._handled: dict[int, _Handling] = {}
        self._arrived: dict[tuple[int, int], int] = {}  # (node, call key) -> last offset applied anywhere
        # A break found inside a controller's handle: raised by raise_pending (raising there would
        # reach the client as the controller's own failure, not as the rule).
        self.pending: InvariantViolation | None = None

    def raise_pending(self) -> None:
        if self.pending is not None:
            raise self.pending

    # -- requests as the controllers handle them --------------------------------------------------------
    def watch(self, controller: Controller) -> None:
        """Wrap ``controller.handle``: remember the image each request was handled on, and check
        the request-id rule there (a retry answered from the table, a RequestRecord written)."""
        handle = controller.handle

        def handle_watched(method: str, request: Message, now_ms: int, *args: Any, **kwargs: Any) -> Any:
            image = controller.image
            committed = controller.committed_offset
            handled = handle(method, request, now_ms, *args, **kwargs)
            self._handled[id(request)] = _Handling(request, controller, image, committed)
            request_id: str = getattr(request, "request_id", "")
            if request_id and self.pending is None:
                try:
                    self._check_request_id(method, request, request_id, image, handled.records)
                except InvariantViolation as broken:
                    self.pending = broken
            return handled

        controller.handle = handle_watched  # type: ignore[method-assign]

    def _check_request_id(
        self,
        method: str,
        request: Message,
        request_id: str,
        image: MetadataImage,
        records: Iterable[records_pb2.MetadataRecord],
    ) -> None:
        self.checks["request-digest"] += 1
        digest = digest_of(request)
        entry = image.requests.get(request_id)
        written = [r.request for r in records if r.WhichOneof("record") == "request"]
        if entry is not None and (written or entry.request_sha256 != digest or entry.method != method):
            raise InvariantViolation(
                "rule-request-digest",
                f"request id {request_id!r} ({method}, digest {digest.hex()[:16]}) answered from the table, "
                f"which recorded it for {entry.method} with digest {entry.request_sha256.hex()[:16]}: "
                f"{as_text(request)}",
            )
        for rec in written:
            if rec.request_id != request_id or rec.request_sha256 != digest:
                raise InvariantViolation(
                    "rule-request-digest",
                    f"{method} with request id {request_id!r} (digest {digest.hex()[:16]}) wrote {as_text(rec)[:200]}",
                )

    def arrived(self, node_id: int, key: int, committed_last: int) -> None:
        """A read reached a node when ``committed_last`` was committed (the image must reach it)."""
        self._arrived[(node_id, key)] = committed_last

    def answered(self, node_id: int, controller: Controller, key: int, request: Message, response: Message) -> None:
        """A call answered by ``node_id``: the rules on what may be accepted, checked on the image
        the request was handled on."""
        arrived = self._arrived.pop((node_id, key), None)
        handling = self._handled.pop(id(request), None)
        if handling is None or handling.request is not request or handling.controller is not controller:
            return  # handled by an earlier controller of the node (a snapshot replaced it) or elsewhere
        if isinstance(response, controller_pb2.DescribeTopicsResponse):
            self.checks["read-index"] += 1
            if arrived is not None and handling.committed_offset < self._last_change_at_or_before(arrived):
                raise InvariantViolation(
                    "rule-read-index",
                    f"node {node_id} answered a read from its image at offset {handling.committed_offset}; "
                    f"offset {arrived} was committed when the read arrived: {as_text(request)[:200]}",
                )
        elif isinstance(response, controller_pb2.BrokerHeartbeatResponse):
            assert isinstance(request, controller_pb2.BrokerHeartbeatRequest)
            self.checks["heartbeat-epoch"] += 1
            registered = handling.image.brokers.get(request.broker_id)
            if response.error_code == errors_pb2.NONE and (
                registered is None or registered.epoch != request.broker_epoch
            ):
                raise InvariantViolation(
                    "rule-heartbeat-epoch",
                    f"node {node_id} accepted a heartbeat of broker {request.broker_id} with epoch "
                    f"{request.broker_epoch}; registered: {registered.epoch if registered else 'none'}",
                )
        elif isinstance(response, controller_pb2.AlterPartitionResponse):
            assert isinstance(request, controller_pb2.AlterPartitionRequest)
            self._alter_partition(node_id, handling.image, request, response)

    def _alter_partition(
        self,
        node_id: int,
        image: MetadataImage,
        request: controller_pb2.AlterPartitionRequest,
        response: controller_pb2.AlterPartitionResponse,
    ) -> None:
        if response.error_code != errors_pb2.NONE:
            return
        sender = image.brokers.get(request.broker_id)
        asked = {(bytes(t.topic_id), p.partition_index): p for t in request.topics for p in t.partitions}
        for topic_result in response.topics:
            for result in topic_result.partitions:
                if result.error_code != errors_pb2.NONE:
                    continue
                self.checks["alter-partition"] += 1
                data = asked[(bytes(topic_result.topic_id), result.partition_index)]
                part = image.partition(bytes(topic_result.topic_id), result.partition_index)
                problems = []
                if sender is None or sender.epoch != request.broker_epoch:
                    problems.append(
                        f"sender epoch {request.broker_epoch}, registered {sender.epoch if sender else None}"
                    )
                if part is None:
                    problems.append("no such partition")
                else:
                    if part.leader != request.broker_id:
                        problems.append(f"the leader is {part.leader}")
                    if (data.leader_epoch, data.partition_epoch) != (part.leader_epoch, part.partition_epoch):
                        problems.append(
                            f"asked at leader epoch {data.leader_epoch}, partition epoch {data.partition_epoch}; "
                            f"current {part.leader_epoch}, {part.partition_epoch}"
                        )
                    for member in data.new_isr_with_epochs:
                        if member.broker_id in part.isr:
                            continue
                        joining = image.brokers.get(member.broker_id)
                        if joining is None or joining.fenced:
                            problems.append(f"adds {'fenced' if joining else 'unregistered'} broker {member.broker_id}")
                        elif member.broker_epoch not in (UNKNOWN_BROKER_EPOCH, joining.epoch):
                            problems.append(
                                f"adds broker {member.broker_id} at epoch {member.broker_epoch}, "
                                f"registered {joining.epoch}"
                            )
                    added = set(result.isr) - set(part.isr)
                    beyond = added - {m.broker_id for m in data.new_isr_with_epochs}
                    if beyond:
                        problems.append(f"the ISR gained {sorted(beyond)}, which the leader did not ask for")
                if problems:
                    raise InvariantViolation(
                        "rule-alter-partition",
                        f"node {node_id} accepted AlterPartition from broker {request.broker_id} for partition "
                        f"{result.partition_index} of {id_text(bytes(topic_result.topic_id))}: {'; '.join(problems)}",
                    )

    # -- the simulated brokers' side -----------------------------------------------------------------
    def told(self, image: MetadataImage, source: Callable[[], str]) -> None:
        """The partition leaders read ``image``: no fenced broker leads a partition in it."""
        self.checks["broker-fenced-leader"] += 1
        fenced = {b for b, r in image.brokers.items() if r.fenced}
        if not fenced:
            return
        for _, topic in image.topics.iter_items():
            for pid, part in enumerate(topic.partitions):
                if part.leader in fenced:
                    raise InvariantViolation(
                        "rule-broker-fenced-leader",
                        f"{source()} tells the brokers that fenced broker {part.leader} leads {topic.name}-{pid} "
                        f"(isr {list(part.isr)}, leader epoch {part.leader_epoch})",
                    )
