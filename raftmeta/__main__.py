"""``python -m raftmeta`` is the ``raftmeta`` command."""

from raftmeta.cli.main import main

main()
