"""Fuzzing (docs/security.md, Fuzzing): the ControllerService of a running quorum, and the batch
and segment decoder. ``raftmeta fuzz`` runs them for a while; ``tests/fuzz`` runs them briefly.

- :mod:`raftmeta.fuzz.protobuf`: hypothesis strategies for arbitrary messages of any protobuf
  descriptor, and for mutations of a given message;
- :mod:`raftmeta.fuzz.requests`: ControllerService requests, valid (from the cluster as last
  described), mutated and arbitrary;
- :mod:`raftmeta.fuzz.outcomes`: which answers are defined, which are failures;
- :mod:`raftmeta.fuzz.controller`: the fuzzer against real node processes, and its final checks;
- :mod:`raftmeta.fuzz.logcheck`: replaying a committed log with invariant 7 on every state;
- :mod:`raftmeta.fuzz.decoder`: damaged batches, a reference model, and the decoder checks;
- :mod:`raftmeta.fuzz.runner` and :mod:`raftmeta.fuzz.report`: rounds until a time budget is
  spent, and what each target reports.
"""
