"""The ControllerService fuzz without processes: the pure controller driven as a node drives it
(every batch committed at once, a request-level RequestError answered INVALID_ARGUMENT), so a
test can run thousands of fuzzed requests a second. An exception of any other kind is what would
kill a node task; it is answered UNKNOWN here, which the judge counts as a failure."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import grpc
from google.protobuf.message import Message
from hypothesis import given

from placement.rng import JavaRandom
from raftmeta.controller import Controller
from raftmeta.controller.brokers import describe_cluster
from raftmeta.controller.errors import RequestError
from raftmeta.controller.topics import describe_topics
from raftmeta.fuzz.controller import request_text
from raftmeta.fuzz.logcheck import LogReport, Replayer
from raftmeta.fuzz.outcomes import Reply, judge
from raftmeta.fuzz.report import TargetReport
from raftmeta.fuzz.requests import ClusterView, FuzzRequest, requests
from raftmeta.fuzz.rounds import fuzz_round
from raftmeta.v1 import controller_pb2, records_pb2

FLEET = 6
TICK_MS = 100


class InProcessController:
    def __init__(self, seed: int = 1) -> None:
        ids = itertools.count(1)
        self.controller = Controller(ids=lambda: next(ids).to_bytes(16, "big"), random=JavaRandom(seed))
        self.now_ms = 0
        self.offset = -1
        self.log: list[list[records_pb2.MetadataRecord]] = []
        self.report = TargetReport("handlers")
        self.request_ids: list[str] = []
        for broker in range(FLEET):
            self._call(
                "RegisterBroker",
                controller_pb2.RegisterBrokerRequest(
                    broker_id=broker,
                    incarnation_id=bytes([0xAA, 1]) + broker.to_bytes(14, "big"),
                    rack=f"rack-{broker % 3}",
                    pool="fast" if broker < 3 else None,
                ),
            )
        self._heartbeats()

    # ---- the node, reduced to its contract ---------------------------------------------------------
    def _commit(self, records: Sequence[records_pb2.MetadataRecord]) -> None:
        self.offset += len(records)
        self.log.append(list(records))
        self.controller.commit(1, self.offset)

    def _call(self, method: str, request: Message) -> Reply:
        try:
            handled = self.controller.handle(method, request, self.now_ms)
        except RequestError as exc:
            return Reply(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception as exc:
            return Reply(grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}")
        if handled.done:
            return Reply(grpc.StatusCode.OK, response=handled.response)
        if handled.records:  # every batch commits at once: the answer is true now
            self._commit(handled.records)
        return Reply(grpc.StatusCode.OK, response=handled.response)

    def _heartbeats(self) -> None:
        """The simulated fleet: every broker of it heartbeats; then the controller's tick."""
        for broker in range(FLEET):
            registered = self.controller.image.brokers.get(broker)
            if registered is not None:
                self._call(
                    "BrokerHeartbeat",
                    controller_pb2.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=registered.epoch),
                )
        ticked = self.controller.tick(self.now_ms)
        if ticked is not None:
            self._commit(ticked.records)

    def view(self) -> ClusterView:
        image = self.controller.committed_image
        topics = describe_topics(image, controller_pb2.DescribeTopicsRequest()).response
        cluster = describe_cluster(image, controller_pb2.DescribeClusterRequest()).response
        return ClusterView.from_responses(topics, cluster, self.request_ids[-200:])

    # ---- the fuzz ----------------------------------------------------------------------------------
    def exercise(self, fuzzed: FuzzRequest) -> None:
        self.now_ms += TICK_MS
        if fuzzed.method == "DescribeQuorum":
            return  # the consensus core answers it, not the controller
        request_id: str = getattr(fuzzed.request, "request_id", "")
        reused = request_id in self.request_ids
        reply = self._call(fuzzed.method, fuzzed.request)
        if request_id and not reused:
            self.request_ids.append(request_id)
        verdict = judge(fuzzed.method, fuzzed.request, reply, request_id_reused=reused)
        self.report.examples += 1
        for label in verdict.labels:
            self.report.count(label)
        for problem in verdict.problems:
            self.report.fail("reply", f"{fuzzed.method}: {problem}", {"request": request_text(fuzzed.request)})
        self._heartbeats()

    def run_round(self, seed: int, examples: int) -> None:
        @fuzz_round(seed, examples)
        @given(requests(self.view()))
        def one(fuzzed: FuzzRequest) -> None:
            self.exercise(fuzzed)

        one()

    def replay(self) -> LogReport:
        """The committed log, replayed from nothing with the log check's replay and invariants."""
        from raftmeta.controller import MetadataImage
        from raftmeta.records import codec

        report = LogReport("in-process log")
        replayer = Replayer(MetadataImage.empty(), report)
        offset = 0
        for records in self.log:
            data = codec.encode_batch(offset, 1, [r.SerializeToString() for r in records], 0)
            if not replayer.batch(data):
                break
            offset += len(records)
        return report
