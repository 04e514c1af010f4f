"""The striped placer's common case in closed form, computed with numpy.

When no broker is fenced, the replication factor is at most the number of racks R, and there
are at least 2R brokers (U), Kafka's ``RackList.place`` follows a fixed pattern between two
reshuffles (a *cycle* of U partitions, epochs 0..U-1, rack order fixed):

* partition n uses the racks at positions ``(offset0 + n + j) mod R`` for j = 0..RF-1, the
  first being the leader's, because every rack is new in the epoch and has a broker to give;
* a rack's k-th visit in a cycle yields ``list[(offset + 1 + k) mod size]`` of its (possibly
  shuffled) unfenced list, and its offset advances by the number of visits;
* one exception: the racks of partition 0 in the very first cycle are visited at epoch 0,
  which equals their initial epoch, so their first visit does not advance the offset.

With U >= 2R no other visit can see its own epoch again (a rack's last visit in a cycle is at
epoch >= U - R >= R, its first in the next at epoch < R), so the pattern holds exactly. The
reshuffles draw the same random numbers as Kafka's, in the same order (they depend only on the
list sizes), so they are replayed first and the placements then computed for all cycles at
once. ``tests/placement/test_striped.py`` checks this path against the step-by-step loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from placement.striped import _RackList

# Partitions computed per numpy pass: bounds the temporary arrays to a few megabytes.
_CHUNK_PARTITIONS = 1 << 16


def applies(rack_list: _RackList, num_partitions: int, replication_factor: int) -> bool:
    """Whether the closed form is exact (and worth it) for this fresh rack list."""
    num_racks = len(rack_list.order)
    return (
        rack_list.num_unfenced == rack_list.num_total
        and replication_factor <= num_racks
        and rack_list.num_unfenced >= 2 * num_racks
        and rack_list.epoch == 0
        and not any(rack_list.u_epoch)
        and num_partitions >= 4 * rack_list.num_unfenced
    )


def place_all(rack_list: _RackList, num_partitions: int, replication_factor: int) -> list[list[int]]:
    """``num_partitions`` placements from a freshly built rack list (see ``applies``)."""
    num_racks = len(rack_list.order)
    cycle_length = rack_list.num_unfenced
    num_cycles = -(-num_partitions // cycle_length)
    sizes = np.array([len(brokers) for brokers in rack_list.unfenced], dtype=np.int64)
    bases = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    # Replay the reshuffles: the rack order and every broker list of each cycle.
    orders = np.empty((num_cycles, num_racks), dtype=np.int64)
    tables = np.empty((num_cycles, cycle_length), dtype=np.int64)
    for cycle in range(num_cycles):
        if cycle:
            rack_list.shuffle()
        orders[cycle] = rack_list.order
        tables[cycle] = [broker for brokers in rack_list.unfenced for broker in brokers]

    offset0 = rack_list.offset % num_racks
    j = np.arange(replication_factor, dtype=np.int64)

    # Offsets at the start of each cycle: the initial ones (minus one for the racks first seen
    # at epoch 0), plus the visits of every earlier cycle. A whole cycle starting at rack
    # offset `shift` visits position q as often as a cycle at offset 0 visits q - shift.
    base_visits = np.bincount(
        ((np.arange(cycle_length)[:, None] + j[None, :]) % num_racks).ravel(), minlength=num_racks
    )
    shifts = (offset0 + np.arange(num_cycles, dtype=np.int64) * cycle_length) % num_racks
    visits = np.zeros((num_cycles, len(sizes)), dtype=np.int64)
    cycle_rows = np.arange(num_cycles)[:, None]
    visits[cycle_rows, orders] = base_visits[(np.arange(num_racks)[None, :] - shifts[:, None]) % num_racks]
    start_offsets = np.array(rack_list.u_offset, dtype=np.int64)
    start_offsets[orders[0, (offset0 + j) % num_racks]] -= 1
    offsets = start_offsets[None, :] + np.cumsum(visits, axis=0) - visits  # (cycle, rack)

    result: list[list[int]] = []
    for chunk_start in range(0, num_partitions, _CHUNK_PARTITIONS):
        partitions = np.arange(chunk_start, min(num_partitions, chunk_start + _CHUNK_PARTITIONS), dtype=np.int64)
        cycle_of = (partitions // cycle_length)[:, None]
        t = partitions[:, None] - cycle_of * cycle_length + j[None, :]  # same t mod R: same rack
        racks = orders[cycle_of, (offset0 + partitions[:, None] + j[None, :]) % num_racks]
        # k: visits to the same rack earlier in the cycle (see the module docstring): from the
        # same diagonal t, the replicas j' > j of earlier partitions; from the diagonals t - R,
        # t - 2R, ..., RF visits each except the oldest, which has min(RF, t' + 1).
        k = np.maximum(0, np.minimum(replication_factor - 1, t) - j[None, :])
        older = t - num_racks
        k += np.where(
            older >= 0,
            (older // num_racks) * replication_factor + np.minimum(replication_factor, older % num_racks + 1),
            0,
        )
        index = (offsets[cycle_of, racks] + 1 + k) % sizes[racks]
        result.extend(tables[cycle_of, bases[racks] + index].tolist())
    return result
