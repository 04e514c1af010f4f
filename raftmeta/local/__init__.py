"""Local tooling: a quorum of node processes on this machine (quorum), a simulated broker
fleet (fleet, partition_leader), throwaway certificates (certs) and how raftmeta starts its own
Python processes (python_command)."""
