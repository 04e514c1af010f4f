"""The node: an asyncio driver around the pure consensus core and controller (DESIGN.md §2, §6-§8).

``config`` (flags and limits), ``disk`` (the writer thread: storage IO and group commit),
``peers`` (outbound RaftService calls), ``node`` (the one task that owns the core and the
controller), ``services`` (the gRPC servicers feeding its inbox, forwarding to the leader),
``app`` (wiring: server, health, reflection, signals).
"""
