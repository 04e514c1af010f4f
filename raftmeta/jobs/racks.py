"""How the verify report names, orders and colours racks: one rule for every plot, table and figure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# A broker without a rack (or not registered) is shown in this rack.
NO_RACK = "(none)"
# Rack colours (Tableau 10's, which stay apart for most colour-blind readers), reused in turn.
RACK_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac")
# broker id -> (rack, pool, fenced), as ClusterState.brokers gives it
BrokerFacts = Mapping[int, tuple[str | None, str | None, bool]]


def rack_of(broker: int, brokers: BrokerFacts) -> str:
    """The broker's rack as the report shows it."""
    return brokers.get(broker, (None, None, False))[0] or NO_RACK


def by_rack(ids: Iterable[int], brokers: BrokerFacts) -> list[int]:
    """Broker ids ordered by rack, then id: the order of every per-broker view of the report."""
    return sorted(ids, key=lambda b: (rack_of(b, brokers), b))


def rack_colors(ids: Iterable[int], brokers: BrokerFacts) -> dict[str, str]:
    """A colour per rack of ``ids``, the same in every plot and table of one report."""
    racks = sorted({rack_of(b, brokers) for b in ids})
    return {rack: RACK_PALETTE[i % len(RACK_PALETTE)] for i, rack in enumerate(racks)}
