"""The node (raftmeta/server/node.py) and the whole-plane simulator (raftmeta/sim/plane.py) perform
their Readies through the one perform policy (raftmeta/raft/perform.py): each asks it for every
Ready, and carries its steps out in the order it gave -- the "answer first" reordering included."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import raftmeta.server.node as node_module
import raftmeta.sim.cluster as cluster_module
from raftmeta.raft import Ready
from raftmeta.raft.perform import Step, plan
from raftmeta.server.node import Node
from raftmeta.sim import draw_params
from raftmeta.sim.plane import PlaneSimulation
from raftmeta.v1 import errors_pb2
from tests.server.test_node_twins import Cluster, create, register_broker, until

FAULTLESS: frozenset[str] = frozenset()


class Recorder:
    """Wraps the policy: what it planned for each leader Ready that committed, and the order in
    which the driver then applied and sent."""

    def __init__(self) -> None:
        self.plans: list[tuple[Step, ...]] = []
        self.effects: list[str] = []

    def plan(self, ready: Ready, **situation: Any) -> tuple[Step, ...]:
        steps = plan(ready, **situation)
        self.plans.append(steps)
        if situation["leader"] and ready.committed:
            self.effects.append(
                "plan:"
                + ("answer-first" if steps.index(Step.APPLY_COMMITTED) < steps.index(Step.SEND) else "send-first")
            )
        return steps


def leader_orders(effects: list[str]) -> list[list[str]]:
    """The effects after each recorded leader plan, up to the next plan."""
    rounds: list[list[str]] = []
    for effect in effects:
        if effect.startswith("plan:"):
            rounds.append([effect])
        elif rounds:
            rounds[-1].append(effect)
    return rounds


def check_rounds(rounds: list[list[str]]) -> int:
    """Every leader round applied and sent in the planned order; returns the answer-first ones."""
    answer_first = 0
    for effects in rounds:
        first_apply = effects.index("apply") if "apply" in effects else len(effects)
        first_send = effects.index("send") if "send" in effects else len(effects)
        if effects[0] == "plan:answer-first":
            answer_first += 1
            assert first_apply < first_send, effects
        elif "send" in effects:
            assert first_send < first_apply, effects
    return answer_first


def test_the_plane_performs_through_the_policy_and_a_light_leader_answers_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(cluster_module, "plan", recorder.plan)
    apply, send = PlaneSimulation._apply, PlaneSimulation._send

    def recorded_apply(self: PlaneSimulation, *args: Any) -> None:
        recorder.effects.append("apply")
        apply(self, *args)

    def recorded_send(self: PlaneSimulation, *args: Any) -> None:
        recorder.effects.append("send")
        send(self, *args)

    monkeypatch.setattr(PlaneSimulation, "_apply", recorded_apply)
    monkeypatch.setattr(PlaneSimulation, "_send", recorded_send)
    result = PlaneSimulation(draw_params(7, voters=3, allowed_faults=FAULTLESS)).run(400)
    assert result.violation is None, result.violation
    assert recorder.plans, "the plane never asked the policy"
    rounds = leader_orders(recorder.effects)
    assert check_rounds(rounds) > 0, "no leader Ready was answered first"


@pytest.mark.asyncio
async def test_the_node_performs_through_the_policy_and_a_light_leader_answers_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(node_module, "plan", recorder.plan)
    apply, send = Node._apply_committed_entries, Node._send

    def recorded_apply(self: Node, *args: Any) -> None:
        recorder.effects.append("apply")
        apply(self, *args)

    def recorded_send(self: Node, *args: Any) -> None:
        if self.is_leader:
            recorder.effects.append("send")
        send(self, *args)

    monkeypatch.setattr(Node, "_apply_committed_entries", recorded_apply)
    monkeypatch.setattr(Node, "_send", recorded_send)
    cluster = Cluster((1, 2, 3), tmp_path)
    for node_id in cluster.voters:
        await cluster.start(node_id)
    try:
        leader = await cluster.leader()
        await register_broker(leader, 0)
        response = await asyncio.wait_for(leader.submit_admin("CreateTopics", create("shared")), 30)
        assert response.topics[0].error_code == errors_pb2.NONE
        await until(lambda: bool(recorder.plans), "a planned Ready")
    finally:
        for node_id in list(cluster.nodes):
            await cluster.stop(node_id)
    assert check_rounds(leader_orders(recorder.effects)) > 0, "no leader Ready was answered first"


def test_node_and_simulator_bind_the_one_policy() -> None:
    assert vars(node_module)["plan"] is plan
    assert vars(cluster_module)["plan"] is plan
