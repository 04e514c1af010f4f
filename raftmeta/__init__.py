"""raftmeta: a KRaft-style replicated metadata log.

Pure cores (``raftmeta.raft``, ``raftmeta.controller``, ``placement``, ``raftmeta.records``)
hold the logic; drivers (``raftmeta.server``, ``raftmeta.storage``, ``raftmeta.jobs``,
``raftmeta.chaos``, ``raftmeta.cli``) perform IO around them. See docs/architecture.md.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("raftmeta")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
