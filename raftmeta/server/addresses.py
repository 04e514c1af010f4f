"""Where the quorum's nodes listen: the configured voters (``--voters``), and every voter a
``VotersRecord`` names since (KIP-853: an added voter's listener comes with the change).

The node consults it after each Ready: when the core's voter set in force changed, the peers
learn the new addresses (so a leader can send BeginQuorumEpoch to a voter it just added) and the
admin service can forward to a leader that was not configured at start-up.
"""

from __future__ import annotations

from raftmeta.raft.voters import VoterSet

# The listener name a node's RaftService / ControllerService address goes under in a VotersRecord.
CONTROLLER_LISTENER = "CONTROLLER"


class AddressBook:
    def __init__(self, configured: dict[int, str]) -> None:
        self.addresses = dict(configured)
        self._seen: VoterSet | None = None

    def learn(self, voters: VoterSet) -> dict[int, str] | None:
        """The addresses new in ``voters`` (None when the set is the one seen last)."""
        if voters is self._seen:
            return None
        self._seen = voters
        learned: dict[int, str] = {}
        for node in voters.nodes:
            for endpoint in node.endpoints:
                address = f"{endpoint.host}:{endpoint.port}"
                if endpoint.name == CONTROLLER_LISTENER and self.addresses.get(node.voter_id) != address:
                    learned[node.voter_id] = address
        self.addresses.update(learned)
        return learned
