"""Benchmarks. Each writes one JSON document of medians and ratios against a baseline measured in
the same process (this machine is shared and noisy): never timed assertions in tests."""
