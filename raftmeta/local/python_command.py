"""The one way raftmeta starts Python processes of its own (nodes, broker fleets, benchmark
helpers, the demo's steps): this interpreter with ``-P``.

``python -m raftmeta`` and ``python -c ...`` put the working directory first on sys.path, so run
from a directory holding a ``raftmeta/`` folder (a clone's parent, a data dir named raftmeta) the
child imported that folder instead of the installed package and died on ImportError. ``-P``
(Python 3.11+, as PYTHONSAFEPATH) leaves the working directory out; PYTHONPATH still applies, so a
checkout named there still wins over an installed copy.
"""

from __future__ import annotations

import sys


def python_command(*args: str) -> list[str]:
    """argv running this interpreter with ``args`` (``-m MODULE ...`` or ``-c CODE``)."""
    return [sys.executable, "-P", *args]


def raftmeta_command(*args: str) -> list[str]:
    """argv running the ``raftmeta`` command with ``args``."""
    return python_command("-m", "raftmeta", *args)
