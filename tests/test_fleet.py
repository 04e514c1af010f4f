"""The simulated broker fleet against a fake controller: registration with racks and pools, steady
heartbeats, fail/recover through the control service, re-registration on a stale epoch, and the
``brokers`` CLI finding the fleet through DescribeCluster."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

import grpc
import grpc.aio
import pytest
from click.testing import CliRunner

from raftmeta.cli.main import cli
from raftmeta.client import ControllerClient, RetryPolicy
from raftmeta.local.fleet import FLEET_ENDPOINT, BrokerFleet, FleetServicer, plan_fleet, rack_name, start_control_server
from raftmeta.v1 import controller_pb2, controller_pb2_grpc, errors_pb2, fleet_pb2_grpc
from tests.controller.grpc_controller import ControllerServer

FAST = RetryPolicy(deadline_s=2.0, attempt_timeout_s=0.5, initial_backoff_s=0.01, max_backoff_s=0.05)


class FakeBrokerController(controller_pb2_grpc.ControllerServiceServicer):
    """Just enough of the controller's broker lifecycle to drive a fleet."""

    def __init__(self) -> None:
        self.registrations: dict[int, controller_pb2.RegisterBrokerRequest] = {}
        self.epochs: dict[int, int] = {}
        self.heartbeats: dict[int, int] = {}
        self.next_epoch = 100

    async def RegisterBroker(self, request, context):  # type: ignore[no-untyped-def]
        self.registrations[request.broker_id] = request
        self.next_epoch += 1
        self.epochs[request.broker_id] = self.next_epoch
        return controller_pb2.RegisterBrokerResponse(broker_epoch=self.next_epoch)

    async def BrokerHeartbeat(self, request, context):  # type: ignore[no-untyped-def]
        if self.epochs.get(request.broker_id) != request.broker_epoch:
            return controller_pb2.BrokerHeartbeatResponse(error_code=errors_pb2.STALE_BROKER_EPOCH)
        self.heartbeats[request.broker_id] = self.heartbeats.get(request.broker_id, 0) + 1
        if request.want_shutdown_now:
            return controller_pb2.BrokerHeartbeatResponse(is_fenced=True, should_shut_down=True)
        return controller_pb2.BrokerHeartbeatResponse(is_fenced=False)

    async def UnregisterBroker(self, request, context):  # type: ignore[no-untyped-def]
        if self.registrations.pop(request.broker_id, None) is None:
            return controller_pb2.UnregisterBrokerResponse(
                error_code=errors_pb2.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker ID {request.broker_id} is not currently registered",
            )
        return controller_pb2.UnregisterBrokerResponse()

    async def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        return controller_pb2.DescribeClusterResponse(
            cluster_id="test",
            controller_id=1,
            brokers=[
                controller_pb2.BrokerDescription(
                    broker_id=r.broker_id, rack=r.rack, broker_epoch=self.epochs[r.broker_id], endpoints=r.endpoints
                )
                for r in self.registrations.values()
            ],
        )


def test_plan_fleet_assigns_racks_round_robin_and_pools() -> None:
    specs = plan_fleet(9, 3, {"fast": [0, 1, 2]})
    assert [s.rack for s in specs[:4]] == ["rack-a", "rack-b", "rack-c", "rack-a"]
    assert [s.pool for s in specs[:4]] == ["fast", "fast", "fast", None]
    assert all(s.rack is None for s in plan_fleet(3, 0))
    assert rack_name(25) == "rack-z"
    assert rack_name(26) == "rack-aa"
    with pytest.raises(ValueError, match="broker 9, which is not in the fleet"):
        plan_fleet(9, 3, {"p": [9]})
    with pytest.raises(ValueError, match="two pools"):
        plan_fleet(9, 3, {"p": [1], "q": [1]})
    with pytest.raises(ValueError, match="--racks"):
        plan_fleet(2, 3)


async def wait_for(predicate, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@pytest.mark.asyncio
async def test_fleet_registers_heartbeats_fails_and_recovers() -> None:
    # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
    controller = cast("Callable[[], FakeBrokerController]", FakeBrokerController)()
    server = grpc.aio.server()
    controller_pb2_grpc.add_ControllerServiceServicer_to_server(controller, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    control, control_address = await start_control_server("127.0.0.1:0")
    async with ControllerClient(f"127.0.0.1:{port}", retry=FAST) as client:
        fleet = BrokerFleet(
            client, plan_fleet(3, 3, {"fast": [2]}), heartbeat_interval_ms=20, control_address=control_address
        )
        fleet_pb2_grpc.add_BrokerFleetServiceServicer_to_server(FleetServicer(fleet), control)
        await control.start()
        fleet.start()
        try:
            await wait_for(lambda: all(controller.heartbeats.get(i, 0) >= 2 for i in range(3)))
            registration = controller.registrations[2]
            assert (registration.rack, registration.pool) == ("rack-c", "fast")
            assert [(e.name, f"{e.host}:{e.port}") for e in registration.endpoints] == [
                (FLEET_ENDPOINT, control_address)
            ]

            fleet.fail([1])
            await asyncio.sleep(0.05)
            frozen = controller.heartbeats[1]
            await asyncio.sleep(0.15)
            assert controller.heartbeats[1] == frozen, "a failed broker must not heartbeat"
            assert controller.heartbeats[0] > 2
            status = {b.broker_id: b for b in fleet.status().brokers}
            assert status[1].failed and not status[0].failed

            # The controller forgets broker 0's registration: the fleet registers it again.
            controller.epochs[0] = -5
            await wait_for(lambda: controller.epochs[0] > 100)

            fleet.recover([1])
            await wait_for(lambda: controller.heartbeats[1] > frozen)
            with pytest.raises(KeyError, match="not in this fleet"):
                fleet.fail([7])
        finally:
            await fleet.stop()
            await control.stop(grace=None)
            await server.stop(grace=None)


def test_brokers_cli_fails_and_recovers_through_the_fleet_endpoint() -> None:
    loop = asyncio.new_event_loop()
    import threading

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    # cast: the generated base answers UNIMPLEMENTED for the methods left out; only its stub makes them abstract
    controller = cast("Callable[[], FakeBrokerController]", FakeBrokerController)()

    async def setup() -> tuple[str, BrokerFleet, list[grpc.aio.Server], ControllerClient]:
        server = grpc.aio.server()
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        control, control_address = await start_control_server("127.0.0.1:0")
        client = ControllerClient(f"127.0.0.1:{port}", retry=FAST)
        fleet = BrokerFleet(client, plan_fleet(2, 2), heartbeat_interval_ms=20, control_address=control_address)
        fleet_pb2_grpc.add_BrokerFleetServiceServicer_to_server(FleetServicer(fleet), control)
        await control.start()
        fleet.start()
        # Registered and heartbeated once: the fleet then knows it is unfenced.
        await wait_for(lambda: all(fleet.states[i].heartbeats >= 1 for i in range(2)))
        return f"127.0.0.1:{port}", fleet, [server, control], client

    address, fleet, servers, client = asyncio.run_coroutine_threadsafe(setup(), loop).result()
    try:
        runner = CliRunner()
        result = runner.invoke(cli, ["brokers", "fail", "--bootstrap-server", address, "--id", "1", "-o", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["brokers"] == [{"id": 1, "failed": True, "fenced": False, "shut_down": False}]
        assert fleet.states[1].failed
        result = runner.invoke(cli, ["brokers", "recover", "--bootstrap-server", address, "--id", "1"])
        assert result.exit_code == 0, result.output
        assert "Broker 1 recovered" in result.stdout
        recovered = fleet.states[1]  # a new name: mypy would keep the narrowing from before the recover
        assert not recovered.failed
        # Controlled shutdown: the heartbeat asks for it, the controller says done, the broker stops.
        result = runner.invoke(cli, ["brokers", "shutdown", "--bootstrap-server", address, "--id", "0", "-o", "json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["brokers"] == [{"id": 0, "failed": True, "fenced": True, "shut_down": True}]
        first_epoch = controller.epochs[0]
        result = runner.invoke(cli, ["brokers", "shutdown", "--bootstrap-server", address, "--id", "0"])
        assert result.exit_code == 1 and "only a running broker can shut down" in result.stderr
        # Restarted: a new incarnation registers anew.
        result = runner.invoke(cli, ["brokers", "recover", "--bootstrap-server", address, "--id", "0"])
        assert result.exit_code == 0, result.output
        asyncio.run_coroutine_threadsafe(wait_for(lambda: controller.epochs[0] > first_epoch), loop).result()
        assert controller.registrations[0].incarnation_id != b""
        result = runner.invoke(cli, ["brokers", "unregister", "--bootstrap-server", address, "--id", "9"])
        assert result.exit_code == 1
        assert "BROKER_ID_NOT_REGISTERED: Broker ID 9 is not currently registered" in result.stderr
        result = runner.invoke(cli, ["brokers", "fail", "--bootstrap-server", address, "--id", "5"])
        assert result.exit_code == 1
        assert "brokers [5] are not registered" in result.stderr
        result = runner.invoke(cli, ["brokers", "list", "--bootstrap-server", address, "-o", "json"])
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)["brokers"]
        assert [(r["id"], r["rack"]) for r in rows] == [(0, "rack-a"), (1, "rack-b")]
    finally:

        async def teardown() -> None:
            await fleet.stop()
            await client.close()
            for server in servers:
                await server.stop(grace=None)

        asyncio.run_coroutine_threadsafe(teardown(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_fleet_catches_up_after_its_delay_and_a_throttled_execute_finishes(tmp_path: Path) -> None:
    """A real controller behind gRPC, the real fleet (catch-up delay 150 ms) and ``reassign execute
    --throttle-moves``: three waves of three copies, each started once the previous completes."""
    server = ControllerServer()
    loop = server.loop

    async def start_fleet() -> tuple[BrokerFleet, ControllerClient]:
        client = ControllerClient(server.address, retry=FAST)
        fleet = BrokerFleet(client, plan_fleet(6, 3), heartbeat_interval_ms=20, catch_up_delay_ms=150)
        fleet.start()
        return fleet, client

    fleet, client = asyncio.run_coroutine_threadsafe(start_fleet(), loop).result()
    try:
        deadline = time.monotonic() + 10
        while not all(server.servicer.controller.committed_image.is_unfenced(b) for b in range(6)):
            assert time.monotonic() < deadline, "the fleet did not register"
            time.sleep(0.02)
        assignments = [
            controller_pb2.ReplicaAssignment(partition_index=i, broker_ids=r)
            for i, r in enumerate([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
        ]
        created = server.run(
            "CreateTopics",
            controller_pb2.CreateTopicsRequest(
                topics=[controller_pb2.CreatableTopic(name="orders", assignments=assignments)]
            ),
        )
        assert created.topics[0].error_code == errors_pb2.NONE
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": "orders", "partition": p, "replicas": r}
                        for p, r in enumerate([[3, 4, 5], [4, 5, 3], [5, 3, 4]])
                    ],
                }
            )
        )
        started = time.monotonic()
        result = CliRunner().invoke(
            cli,
            ["reassign", "execute", "--bootstrap-server", server.address, "--plan", str(plan),
             "--throttle-moves", "3", "--wait-timeout", "20"],
        )  # fmt: skip
        elapsed = time.monotonic() - started
        assert result.exit_code == 0, result.output
        waves = [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("Wave")]
        assert waves == ["Wave 1/3", "Wave 2/3", "Wave 3/3"]
        assert elapsed >= 3 * 0.15, "each wave waits for the brokers' catch-up delay"
        topic = server.servicer.controller.committed_image.topic_by_name("orders")
        assert topic is not None
        assert [(p.replicas, p.isr) for p in topic.partitions] == [
            ((3, 4, 5), (3, 4, 5)),
            ((4, 5, 3), (4, 5, 3)),
            ((5, 3, 4), (5, 3, 4)),
        ]
        assert sum(state.caught_up_reported for state in fleet.states.values()) >= 9
        assert all(not state.adding_since for state in fleet.states.values())
    finally:

        async def teardown() -> None:
            await fleet.stop()
            await client.close()

        asyncio.run_coroutine_threadsafe(teardown(), loop).result()
        server.stop()


def test_the_partition_leaders_read_the_image_only_while_an_isr_change_may_be_due() -> None:
    fleet = BrokerFleet(
        ControllerClient("127.0.0.1:1"),
        plan_fleet(2, 0),
        catch_up_delay_ms=2_000,
        replica_lag_time_max_ms=30_000,
        isr_check_interval_ms=1_000,
    )
    a, b = fleet.states[0], fleet.states[1]
    a.up_since = b.up_since = 100.0
    assert fleet.isr_change_possible(104.9)  # within the catch-up delay plus three checks
    assert not fleet.isr_change_possible(105.1)  # a steady fleet: no full reads
    b.went_down(200.0)
    assert fleet.isr_change_possible(232.9)  # it may still leave ISRs (replica lag time)
    assert not fleet.isr_change_possible(233.1)
