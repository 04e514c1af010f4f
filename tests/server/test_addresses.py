"""The node's address book: configured addresses, and the listeners voter changes bring."""

from __future__ import annotations

from raftmeta.raft.voters import Endpoint, VoterNode, VoterSet
from raftmeta.server.addresses import AddressBook


def voter(node_id: int, port: int) -> VoterNode:
    return VoterNode(node_id, b"", (Endpoint("CONTROLLER", "10.0.0.9", port),))


def test_an_added_voters_listener_is_learnt_once() -> None:
    book = AddressBook({1: "h1:1", 2: "h2:2"}, {})
    assert book.learn(VoterSet.of_ids([1, 2])) == {}
    grown = VoterSet((VoterNode(1), VoterNode(2), voter(5, 9095)))
    assert book.learn(grown) == {5: "10.0.0.9:9095"}
    assert book.learn(grown) is None  # the same set: nothing to do
    assert book.addresses == {1: "h1:1", 2: "h2:2", 5: "10.0.0.9:9095"}


def test_a_configured_address_wins_over_the_logs() -> None:
    # The chaos harness reaches node 4 through a proxy: the listener in the log must not replace it.
    book = AddressBook({1: "h1:1"}, {4: "proxy:7004"})
    assert book.learn(VoterSet.of_ids([1])) == {4: "proxy:7004"}  # the peers hear of it once
    assert book.learn(VoterSet((VoterNode(1), voter(4, 9094)))) == {}
    assert book.addresses[4] == "proxy:7004"


def test_a_bootstrap_voter_that_moved_is_reached_where_the_log_says() -> None:
    book = AddressBook({1: "h1:1", 2: "h2:2"}, {})
    book.learn(VoterSet.of_ids([1, 2]))
    assert book.learn(VoterSet((VoterNode(1), voter(2, 9102)))) == {2: "10.0.0.9:9102"}
    assert book.addresses[2] == "10.0.0.9:9102"
