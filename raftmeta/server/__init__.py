"""The node: an asyncio driver around the pure consensus core and controller (DESIGN.md §2, §6-§8).

``config`` (flags and limits), ``node`` (the one task that owns the QuorumController: inbox,
futures, disk, peers, timers), its seams ``seams`` (the ``Disk`` and ``PeerLink`` types) with the
real ``disk`` (the writer thread: storage IO) and ``peers`` (outbound RaftService calls over gRPC),
its helpers ``group_commit``, ``snapshots``, ``probe`` (is the leader's process gone?),
``telemetry``, ``heap``, ``recover`` and ``inbox``, ``services`` (the gRPC servicers feeding its
inbox, forwarding to the leader), ``guards``, ``app`` (wiring: server, health, reflection, signals).
"""
