"""The ``raftmeta`` command line (DESIGN.md §8)."""
