"""The batch/segment decoder fuzz, short: a fixed set of examples per CI run.

derandomize=True: CI runs the same ~200 cases every time (a failure here is a regression, never
a new input turning up on an unrelated change); finding new inputs is what `raftmeta fuzz
--target decoder --duration S` with a fresh seed is for. database=None: nothing is written to a
.hypothesis directory.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings

from raftmeta.fuzz.decoder import DecoderCase, check_case, decoder_cases, reference_log, reference_prefix
from raftmeta.records import codec
from raftmeta.storage.log import SegmentLog

pytestmark = pytest.mark.usefixtures("quiet_disk")


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=decoder_cases())
def test_decoders_yield_valid_batches_or_a_corruption_error_at_the_right_byte(case: DecoderCase) -> None:
    result = check_case(case)
    assert not result.failures, f"{result.failures}\n{case.describe()}"


def _log(*counts: int) -> list[bytes]:
    batches, offset = [], 0
    for epoch, count in enumerate(counts):
        batches.append(codec.encode_batch(offset, epoch, [b"r%d" % i for i in range(count)], 0))
        offset += count
    return batches


def test_reference_model_accepts_a_valid_log_and_stops_at_damage() -> None:
    batches = _log(2, 1, 3)
    data = b"".join(batches)
    valid, stop = reference_prefix(data)
    assert [b.base_offset for b in valid] == [0, 2, 3] and stop == len(data)
    assert all(b.framing_ok for b in valid)
    damaged = bytearray(data)
    damaged[len(batches[0]) + 40] ^= 1  # inside batch 1's records: its CRC fails
    valid, stop = reference_prefix(bytes(damaged))
    assert [b.base_offset for b in valid] == [0] and stop == len(batches[0])


def test_reference_recovery_cuts_before_every_batch_of_a_higher_epoch() -> None:
    batches = _log(1, 1, 1)
    lowered = bytearray(batches[2])
    struct.pack_into(">i", lowered, 12, 0)  # batch 2 now claims epoch 0, after epochs 0 and 1
    kept, kept_bytes, end = reference_log(b"".join([*batches[:2], bytes(lowered)]))
    assert [b.base_offset for b in kept] == [0] and kept_bytes == len(batches[0]) and end == 1


def _case(family: str, data: bytes, original: tuple[bytes, ...] = (), floor: int = 0) -> DecoderCase:
    return DecoderCase(family, "mutated", original, data, ("hand-made",), floor)


def test_a_decoder_that_skips_a_bad_batch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _log(1, 1)
    damaged = bytearray(b"".join(batches))
    damaged[len(batches[0]) + 30] ^= 0x10  # batch 1's timestamp: covered by the CRC
    case = _case("buffer", bytes(damaged), tuple(batches))
    assert check_case(case).failures == []
    # Planted bug: a decoder that does not check CRCs yields the damaged batch as valid.
    monkeypatch.setattr(codec, "check_batch", codec.decode_header)
    failures = check_case(case).failures
    assert any("yielded an invalid batch at byte" in f for f in failures), failures


def test_a_recovery_that_keeps_damage_below_the_floor_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _log(1, 1, 1)
    damaged = bytearray(b"".join(batches))
    damaged[len(batches[0]) + 30] ^= 0x10
    case = _case("recovery", bytes(damaged), tuple(batches), floor=3)
    result = check_case(case)
    assert result.failures == [] and result.outcome == "recovery: refused"
    # Planted bug: recovery that never refuses (as if every start were --repair-log).
    real_open = SegmentLog.open  # the class raftmeta.fuzz.decoder opens its logs with
    monkeypatch.setattr(SegmentLog, "open", lambda d, **kw: real_open(d, **{**kw, "repair": True}))
    failures = check_case(case).failures
    assert any("below the floor 3, without refusing" in f for f in failures), failures
