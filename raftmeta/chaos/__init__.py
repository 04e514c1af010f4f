"""Chaos runs against real node processes: nemesis, workload, history recorder and checker.

``raftmeta chaos`` (raftmeta/cli/chaos.py) drives :func:`raftmeta.chaos.runner.run_chaos`;
docs/chaos.md explains the faults, the checks and the report.
"""
