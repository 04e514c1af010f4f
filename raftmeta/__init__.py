"""raftmeta: a KRaft-style replicated metadata log.

Pure cores (``raftmeta.raft``, ``raftmeta.controller``, ``placement``, ``raftmeta.records``)
hold the logic; drivers (``raftmeta.server``, ``raftmeta.storage``, ``raftmeta.jobs``,
``raftmeta.chaos``, ``raftmeta.cli``) perform IO around them. See docs/architecture.md.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use: importlib.metadata costs
    every command ~20 ms of start-up, and only ``--version`` needs it."""
    if name != "__version__":
        raise AttributeError(f"module 'raftmeta' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("raftmeta")
    except PackageNotFoundError:  # running from a source tree that was never installed
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
