"""Durable storage for one node: the batch codec (pure), segment log, quorum-state, snapshots.

Only ``raftmeta.storage.codec`` is pure and may be imported by the consensus core; everything
else in this package does disk IO and belongs to the drivers.
"""
