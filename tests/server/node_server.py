"""A real node (storage, consensus core, controller, the project's servicers) behind a grpc.aio server
on loopback, run on its own loop thread in the test process, for tests of what the servicers let
through. A single-voter quorum elects itself at once; extra voters that do not exist keep it from
ever leading (every admin call then needs forwarding)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc.aio

from raftmeta.api.limits import grpc_server_options
from raftmeta.raft import Role
from raftmeta.records.kafka.mapping import METADATA_VERSION_FEATURE
from raftmeta.server.config import NodeConfig
from raftmeta.server.node import Node
from raftmeta.server.services import ControllerServicer, RaftServicer, add_controller_service
from raftmeta.v1 import raft_pb2_grpc

T = TypeVar("T")
# Nothing listens on port 1: the voters named there never answer.
ABSENT = "127.0.0.1:1"


@dataclass(frozen=True)
class CoreView:
    role: Role
    epoch: int
    leader_id: int
    log_end_offset: int
    high_watermark: int


class NodeServer:
    def __init__(self, data_dir: Path, *, node_id: int = 1, voters: tuple[int, ...] = (1,), cluster_id: str = "c"):
        self.config = NodeConfig(
            node_id=node_id,
            listen="127.0.0.1:0",
            voters=dict.fromkeys(voters, ABSENT),
            data_dir=data_dir,
            cluster_id=cluster_id,
            election_timeout_ms=50,
            election_backoff_max_ms=50,
            forward_wait_ms=200,
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.address = self.run(self._start())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    async def _start(self) -> str:
        self.node = Node(self.config)
        await self.node.start()
        self.controller = ControllerServicer(self.node)
        self.server = grpc.aio.server(options=grpc_server_options())
        raft_pb2_grpc.add_RaftServiceServicer_to_server(RaftServicer(self.node), self.server)
        add_controller_service(self.controller, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.runner = asyncio.create_task(self.node.run())
        return f"127.0.0.1:{port}"

    def view(self) -> CoreView:
        async def read() -> CoreView:
            core = self.node.core
            return CoreView(core.role, core.epoch, core.leader_id, core.log_end_offset, core.high_watermark)

        return self.run(read())

    def wait_until_leader(self) -> CoreView:
        """The single voter's election and its controller's first batch, metadata.version,
        committed: the node is quiet then (a bounded wait, not a timing assertion)."""

        def settled() -> bool:
            core = self.node.core
            return (
                self.node.is_leader
                and core.high_watermark == core.log.end_offset
                and self.node.qc.controller.committed_image.feature_level(METADATA_VERSION_FEATURE) is not None
            )

        async def wait() -> None:
            # The node has no event for "the first batches of my epoch are committed": poll it.
            while not settled():  # noqa: ASYNC110
                await asyncio.sleep(0.01)

        self.run(asyncio.wait_for(wait(), 20))
        return self.view()

    def stop(self) -> None:
        async def stop() -> None:
            self.node.stop()
            await asyncio.gather(self.runner, return_exceptions=True)
            await self.server.stop(grace=None)
            await self.controller.close()
            await self.node.close()

        self.run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
