"""A hypothesis state machine: append / flush / truncate / snapshot / crash / reopen against a model.

The model is the list of batches the log should hold. A crash closes the files without any
flush and then drops every byte the log did not report durable -- except a random prefix of the
undurable tail, as a page cache that wrote part of it back would leave (a torn write). Recovery
must then give back exactly the durable batches plus the whole batches inside that prefix.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from raftmeta.records import codec
from raftmeta.storage.datadir import NodeStorage
from raftmeta.storage.errors import InvalidAppendError
from raftmeta.storage.high_watermark import read_high_watermark
from raftmeta.storage.snapshot import SnapshotId, encode_snapshot


@dataclass(frozen=True)
class ModelBatch:
    base: int
    epoch: int
    data: bytes

    @property
    def next(self) -> int:
        return codec.check_batch(self.data).next_offset


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="raftmeta-stateful-"))
        self.node = self._open()
        self.batches: list[ModelBatch] = []
        self.flushed = 0  # the model's floor for durable_end_offset
        self.high_watermark = 0
        self.snapshot: SnapshotId | None = None
        self.epoch = 1
        self.clock = 0

    def _open(self) -> NodeStorage:
        return NodeStorage.open(self.root, cluster_id="model", node_id=1, segment_bytes=1024, index_interval_bytes=64)

    # -- model helpers ------------------------------------------------------------------------

    @property
    def end(self) -> int:
        return self.batches[-1].next if self.batches else (self.snapshot.offset if self.snapshot else 0)

    def kept(self) -> list[ModelBatch]:
        start = self.node.log.log_start_offset
        return [b for b in self.batches if b.base >= start]

    def expected_epoch_end(self, epoch: int) -> tuple[int, int]:
        entries: list[tuple[int, int]] = []
        for b in self.kept():
            if not entries or entries[-1][0] != b.epoch:
                entries.append((b.epoch, b.base))
        below = [i for i, (e, _) in enumerate(entries) if e <= epoch]
        if below:
            i = below[-1]
            return entries[i][0], entries[i + 1][1] if i + 1 < len(entries) else self.end
        if self.snapshot is not None and self.snapshot.epoch <= epoch:
            return self.snapshot.epoch, self.snapshot.offset
        return -1, -1

    # -- rules --------------------------------------------------------------------------------

    @rule(count=st.integers(1, 5), bump=st.booleans())
    def append(self, count: int, bump: bool) -> None:
        self.epoch += int(bump)
        self.clock += 1
        base = self.end
        records = [f"r{base + i}".encode() * (1 + (base + i) % 3) for i in range(count)]
        header = self.node.log.append_batch(self.epoch, records, self.clock)
        assert header.base_offset == base
        self.batches.append(ModelBatch(base, self.epoch, codec.encode_batch(base, self.epoch, records, self.clock)))

    @rule(offset_delta=st.sampled_from([-1, 1, 5]))
    def refused_append(self, offset_delta: int) -> None:
        base = max(0, self.end + offset_delta)
        if base == self.end:
            return
        try:
            self.node.log.append(codec.encode_batch(base, self.epoch, [b"x"], 0))
        except InvalidAppendError:
            pass
        else:
            raise AssertionError("a non-contiguous batch was accepted")

    @rule()
    def flush(self) -> None:
        assert self.node.log.flush() == self.end
        self.flushed = self.end

    @rule()
    def checkpoint_high_watermark(self) -> None:
        # as if everything durable were committed
        value = self.node.checkpoint_high_watermark(self.node.log.durable_end_offset)
        assert value >= self.high_watermark
        self.high_watermark = value

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        low = max(self.high_watermark, self.snapshot.offset if self.snapshot else 0, self.node.log.log_start_offset)
        if low > self.end:
            return
        offset = data.draw(st.integers(low, self.end), label="truncate_to")
        holding = [b for b in self.batches if b.base <= offset < b.next]
        expected = holding[0].base if holding else offset
        if expected < low:  # the batch straddles the committed point: truncate at its end instead
            return
        truncates = expected < self.end
        assert self.node.log.truncate_to(offset) == expected
        self.batches = [b for b in self.batches if b.base < expected]
        if truncates:  # a real truncation is durable on return; truncating at the end is a no-op
            self.flushed = expected

    @rule(data=st.data())
    def take_snapshot(self, data: st.DataObject) -> None:
        self.checkpoint_high_watermark()  # a node snapshots only what is committed
        floor = self.snapshot.offset if self.snapshot else 0
        candidates = [b.next for b in self.batches if floor < b.next <= self.high_watermark]
        if not candidates:
            return
        offset = data.draw(st.sampled_from(candidates), label="snapshot_at")
        epoch = next(b.epoch for b in self.batches if b.next == offset)
        sid = SnapshotId(offset, epoch)
        self.node.take_snapshot(sid, [b"image-%d" % offset], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
        self.snapshot = sid

    @rule(ahead=st.integers(0, 20), bump=st.booleans())
    def install_snapshot(self, ahead: int, bump: bool) -> None:
        """A follower receives the leader's snapshot (FetchSnapshot) and restarts its log there."""
        offset = max(self.end, self.high_watermark) + ahead
        self.epoch += int(bump)
        sid = SnapshotId(offset, self.epoch)
        if self.snapshot is not None and sid <= self.snapshot:
            return
        data = b"".join(
            encode_snapshot(sid, [b"leader-image"], last_contained_log_timestamp_ms=0, append_timestamp_ms=0)
        )
        self.node.install_snapshot_data(sid, data)
        self.batches = []
        self.snapshot = sid
        self.flushed = offset

    @rule(data=st.data())
    def crash_and_reopen(self, data: st.DataObject) -> None:
        log = self.node.log
        durable = log.durable_end_offset
        assert self.flushed <= durable <= self.end
        active = log.segment_files()[-1]
        active_base = int(active.stem)
        assert durable >= active_base, "rolling fsyncs, so only the active segment holds undurable data"
        durable_pos = sum(len(b.data) for b in self.batches if active_base <= b.base < durable)
        tail = [b for b in self.batches if b.base >= durable]
        extra = data.draw(st.integers(0, sum(len(b.data) for b in tail)), label="torn_bytes_kept")
        for seg in log._segments:  # the process dies: nothing is flushed or closed cleanly
            seg.close()
        os.truncate(active, durable_pos + extra)
        survivors, used = [], 0
        for b in tail:
            used += len(b.data)
            if used > extra:
                break
            survivors.append(b)
        self.batches = [b for b in self.batches if b.base < durable] + survivors
        self.node = self._open()
        self.flushed = self.end

    @rule()
    def clean_reopen(self) -> None:
        self.node.close()
        self.node = self._open()
        self.flushed = self.end

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        log = self.node.log
        assert log.log_end_offset == self.end
        assert self.flushed <= log.durable_end_offset <= self.end
        start = log.log_start_offset
        assert start <= (self.snapshot.offset if self.snapshot else 0) or start == self.end
        kept = self.kept()
        assert start in {b.base for b in kept} | {self.end}
        assert log.read(start, 1 << 22) == b"".join(b.data for b in kept)
        last_epoch = kept[-1].epoch if kept else (self.snapshot.epoch if self.snapshot else 0)
        assert log.last_epoch == last_epoch
        for epoch in range(self.epoch + 2):
            assert log.epoch_end_offset(epoch) == self.expected_epoch_end(epoch), f"epoch {epoch}"
        assert read_high_watermark(self.root) == self.high_watermark

    def teardown(self) -> None:
        with contextlib.suppress(Exception):
            self.node.close()
        shutil.rmtree(self.root, ignore_errors=True)


LogMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogMachine = LogMachine.TestCase
