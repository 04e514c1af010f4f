"""Where the quorum's nodes listen: the configured voters (``--voters``) and other nodes
(``--peer-addresses``), and every other voter a ``VotersRecord`` names since (KIP-853: an added
voter's listener comes with the change, and UpdateRaftVoter moves one). The log's listener wins
over a bootstrap voter's address (``--voters``: a voter that moved is reached where it went); an
address given with ``--peer-addresses`` wins over the log's: the operator reaches that node
another way (through a proxy, as the chaos harness does).

The node consults it after each Ready: when the core's voter set in force changed, the peers
learn the new addresses (so a leader can send BeginQuorumEpoch to a voter it just added) and the
admin service can forward to a leader that was not configured at start-up.
"""

from __future__ import annotations

from raftmeta.raft.voters import VoterSet

# The listener name a node's RaftService / ControllerService address goes under in a VotersRecord.
CONTROLLER_LISTENER = "CONTROLLER"


class AddressBook:
    def __init__(self, voters: dict[int, str], others: dict[int, str]) -> None:
        self.addresses = {**others, **voters}
        self._overridden = frozenset(others) - frozenset(voters)
        self._seen: VoterSet | None = None
        # The peers are built with the voters' addresses: the others go to them at the first learn.
        self._unannounced = {i: a for i, a in others.items() if i not in voters}

    def learn(self, voters: VoterSet) -> dict[int, str] | None:
        """The addresses new in ``voters`` (None when the set is the one seen last)."""
        if voters is self._seen:
            return None
        self._seen = voters
        learned, self._unannounced = self._unannounced, {}
        for node in voters.nodes:
            for endpoint in node.endpoints:
                address = f"{endpoint.host}:{endpoint.port}"
                overridden = node.voter_id in self._overridden
                if (
                    endpoint.name == CONTROLLER_LISTENER
                    and not overridden
                    and self.addresses.get(node.voter_id) != address
                ):
                    learned[node.voter_id] = address
        self.addresses.update(learned)
        return learned
