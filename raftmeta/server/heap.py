"""Keeping the metadata image out of the cyclic garbage collector's way."""

from __future__ import annotations

import gc
from typing import Any


def freeze_heap(log: Any, why: str) -> None:
    """Move everything alive now (above all the metadata image: millions of objects for a big
    cluster) out of the cyclic collector's reach. Full collections would otherwise rescan the
    whole image again and again while nothing in it is garbage; the controller's replay
    measured ~20% faster with the image frozen. ``gc.freeze`` is O(1); the image stays
    reference-counted, so records that a later change drops are still freed."""
    gc.freeze()
    log.info("heap frozen", reason=why, frozen_objects=gc.get_freeze_count())
