"""The chaos tape's reader of a live node's segment files (raftmeta/chaos/tape.py, on the records'
one walk): it copies committed batches only, stops before a batch still being written or damaged,
and starts a file over when the file was replaced under the same name."""

from __future__ import annotations

from pathlib import Path

from raftmeta.chaos.tape import LOG_DIR_NAME, CommittedTape
from raftmeta.records import codec
from raftmeta.storage.high_watermark import HIGH_WATERMARK_CHECKPOINT, render_high_watermark

SEGMENT = "00000000000000000000.log"


def batches(first_offset: int, counts: list[int], epoch: int = 1) -> list[bytes]:
    out = []
    offset = first_offset
    for count in counts:
        out.append(codec.encode_batch(offset, epoch, [bytes([offset % 256])] * count, 1_700_000_000_000))
        offset += count
    return out


def node_dir(tmp_path: Path, segment: bytes, high_watermark: int) -> Path:
    node = tmp_path / "node-1"
    (node / LOG_DIR_NAME).mkdir(parents=True, exist_ok=True)
    (node / LOG_DIR_NAME / SEGMENT).write_bytes(segment)
    (node / HIGH_WATERMARK_CHECKPOINT).write_bytes(render_high_watermark(high_watermark))
    return node


def test_only_committed_whole_batches_are_copied_and_the_rest_on_a_later_poll(tmp_path: Path) -> None:
    first, second, third = batches(0, [2, 3, 1])
    node = node_dir(tmp_path, first + second + third[:-4], high_watermark=5)  # the third is torn
    tape = CommittedTape({1: node})
    tape.poll()
    assert tape.batches == {0: first, 2: second}
    node_dir(tmp_path, first + second + third, high_watermark=5)
    tape.poll()
    assert tape.batches == {0: first, 2: second}  # whole now, but above the high watermark
    node_dir(tmp_path, first + second + third, high_watermark=6)
    tape.poll()
    assert tape.batches == {0: first, 2: second, 5: third}
    assert tape.conflicts == []


def test_a_batch_failing_its_crc_is_not_copied(tmp_path: Path) -> None:
    first, second = batches(0, [1, 1])
    damaged = bytearray(second)
    damaged[-1] ^= 0xFF
    tape = CommittedTape({1: node_dir(tmp_path, first + bytes(damaged), high_watermark=2)})
    tape.poll()
    assert tape.batches == {0: first}


def test_a_file_replaced_under_the_same_name_is_read_again_from_its_start(tmp_path: Path) -> None:
    (first,) = batches(0, [2])
    node = node_dir(tmp_path, first, high_watermark=2)
    tape = CommittedTape({1: node})
    tape.poll()
    # Replaced by another file of that name: where the cursor stopped there is now a batch that
    # does not continue the offsets the tape copied, so the tape starts the file over on its next
    # poll instead of copying from the old position (and reports the batch that changed).
    replaced = [codec.encode_batch(0, 2, [b"xxxxxx"], 0), codec.encode_batch(1, 2, [b"y"], 0)]
    assert len(replaced[0]) == len(first)
    node_dir(tmp_path, b"".join(replaced), high_watermark=2)
    tape.poll()
    assert tape.batches == {0: first}
    assert tape.conflicts == []
    tape.poll()
    assert tape.batches == {0: first, 1: replaced[1]}
    assert len(tape.conflicts) == 1
    assert tape.conflicts[0].startswith("committed batch at offset 0 changed: node 1 has ")
