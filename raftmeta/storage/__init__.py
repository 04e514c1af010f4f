"""Durable storage for one node: segment log, quorum-state, high-watermark checkpoint, snapshots.

Everything in this package does disk IO and belongs to the drivers; the batch format it stores
is ``raftmeta.records`` (pure), which the consensus core and the simulator use instead.
"""
