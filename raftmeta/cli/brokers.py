"""``raftmeta brokers fleet|register|list|fail|recover|shutdown|unregister``: the simulated brokers.

``fleet`` runs a fleet of simulated brokers in the foreground (``quorum up --brokers`` starts
one); ``fail``/``recover``/``shutdown`` act on brokers through the fleet's control service, which
they find from any quorum node via DescribeCluster (the brokers' FLEET endpoint): ``fail`` is a
crash (heartbeats stop; fencing follows the session timeout), ``shutdown`` Kafka's controlled
shutdown (leaderships and ISR memberships move first, then the broker stops), ``recover`` brings
either back. ``unregister`` is Kafka's UnregisterBroker, sent to the quorum, for a broker gone for good.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

import click
import grpc

from raftmeta.api.limits import grpc_channel_options
from raftmeta.cli.common import (
    BROKER_ID,
    INT32_MAX,
    CheckFailed,
    check_int,
    emit_json,
    int_range,
    output_option,
    usage_error,
)
from raftmeta.cli.connect import bootstrap_options, connect, tls_from_context, tls_options
from raftmeta.cli.topics import error_name
from raftmeta.client import ControllerClient, RetryPolicy, parse_bootstrap
from raftmeta.local.fleet import (
    FLEET_ENDPOINT,
    BrokerFleet,
    BrokerSpec,
    FleetServicer,
    plan_fleet,
    start_control_server,
)
from raftmeta.storage.fileio import atomic_write
from raftmeta.tls import TlsConfig
from raftmeta.v1 import controller_pb2, fleet_pb2, fleet_pb2_grpc

# The most brokers one simulated fleet runs (and so the longest id range a --pool can name).
FLEET_BROKERS_MAX = 10_000


def parse_pools(specs: tuple[str, ...]) -> dict[str, list[int]]:
    """``("fast=0-2", "slow=3,4")`` → {"fast": [0, 1, 2], "slow": [3, 4]}."""
    pools: dict[str, list[int]] = {}
    for spec in specs:
        name, sep, members = spec.partition("=")
        if not sep or not name:
            raise usage_error(f"{spec!r} is not NAME=IDS (e.g. fast=0-2 or fast=0,1,2)", "--pool")
        ids: list[int] = []
        try:
            for part in members.split(","):
                low_text, dash, high_text = part.partition("-")
                low = check_int(int(low_text), BROKER_ID.low, BROKER_ID.high, f"{spec!r}: broker id", "--pool")
                high = check_int(int(high_text), low, BROKER_ID.high, f"{spec!r}: range end", "--pool") if dash else low
                if high - low >= FLEET_BROKERS_MAX:
                    raise usage_error(f"{spec!r}: {part} names more than {FLEET_BROKERS_MAX} brokers", "--pool")
                ids.extend(range(low, high + 1))
        except ValueError as exc:
            raise usage_error(f"{spec!r}: broker ids must be integers or ranges like 0-2", "--pool") from exc
        pools[name] = ids
    return pools


@click.group()
def brokers() -> None:
    """Simulated brokers: run a fleet, register, list, fail and recover brokers."""


@brokers.command("fleet")
@click.option("--bootstrap-server", "bootstrap_server", required=True, envvar="RAFTMETA_BOOTSTRAP_SERVER",
              help="host:port[,host:port...] of quorum nodes.")  # fmt: skip
@click.option("--brokers", "count", type=int_range(1, FLEET_BROKERS_MAX), default=9, show_default=True)
@click.option("--racks", type=int_range(0, FLEET_BROKERS_MAX), default=3, show_default=True,
              help="0 = no rack information.")  # fmt: skip
@click.option("--pool", "pools", multiple=True, help="Broker pool NAME=IDS, e.g. fast=0-2; repeatable.")
@click.option("--first-id", type=BROKER_ID, default=0, show_default=True, help="Id of the first broker.")
@click.option("--heartbeat-interval-ms", type=int_range(10), default=1000, show_default=True)
@click.option("--catch-up-delay-ms", type=int_range(0), default=2000, show_default=True,
              help="How long a follower takes to catch up: a partition it is told to add (reassignment), "
                   "or its partitions after it comes back (then its leaders add it to the ISR).")  # fmt: skip
@click.option("--replica-lag-time-max-ms", type=int_range(1), default=30_000, show_default=True,
              help="replica.lag.time.max.ms: a follower down this long leaves its partitions' ISRs.")  # fmt: skip
@click.option("--isr-check-interval-ms", type=int_range(10), default=1000, show_default=True,
              help="How often the partition leaders compare their ISRs with their followers.")  # fmt: skip
@click.option("--listen", default="127.0.0.1:0", show_default=True, help="Address of the fleet's control service.")
@click.option("--ready-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write {address, brokers} here as JSON once the control service listens.")  # fmt: skip
@tls_options
def fleet(
    bootstrap_server: str,
    count: int,
    racks: int,
    pools: tuple[str, ...],
    first_id: int,
    heartbeat_interval_ms: int,
    catch_up_delay_ms: int,
    replica_lag_time_max_ms: int,
    isr_check_interval_ms: int,
    listen: str,
    ready_file: Path | None,
) -> None:
    """Run simulated brokers that register, heartbeat and lead partitions until stopped (SIGTERM or Ctrl-C)."""
    if first_id + count - 1 > INT32_MAX:
        raise usage_error(f"broker ids {first_id}..{first_id + count - 1} go past {INT32_MAX}", "--first-id")
    try:
        parse_bootstrap(bootstrap_server)
        specs = plan_fleet(count, racks, parse_pools(pools), first_id)
    except ValueError as exc:
        raise usage_error(str(exc)) from exc
    tls = tls_from_context()
    asyncio.run(
        _run_fleet(
            bootstrap_server,
            specs,
            heartbeat_interval_ms,
            listen,
            ready_file,
            catch_up_delay_ms,
            tls,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            isr_check_interval_ms=isr_check_interval_ms,
        )
    )


async def _run_fleet(
    bootstrap_server: str,
    specs: list[BrokerSpec],
    heartbeat_interval_ms: int,
    listen: str,
    ready_file: Path | None,
    catch_up_delay_ms: int = 2000,
    tls: TlsConfig | None = None,
    *,
    replica_lag_time_max_ms: int = 30_000,
    isr_check_interval_ms: int = 1000,
) -> None:
    server, address = await start_control_server(listen)
    retry = RetryPolicy(deadline_s=max(2.0, heartbeat_interval_ms / 1000), attempt_timeout_s=1.0)
    async with ControllerClient(bootstrap_server, retry=retry, tls=tls) as client:
        fleet_ = BrokerFleet(
            client,
            specs,
            heartbeat_interval_ms=heartbeat_interval_ms,
            control_address=address,
            catch_up_delay_ms=catch_up_delay_ms,
            replica_lag_time_max_ms=replica_lag_time_max_ms,
            isr_check_interval_ms=isr_check_interval_ms,
        )
        fleet_pb2_grpc.add_BrokerFleetServiceServicer_to_server(FleetServicer(fleet_), server)
        await server.start()
        fleet_.start()
        if ready_file is not None:
            # Renamed into place whole: whoever waits for the file to exist reads all of it (a plain
            # write let a chaos run read it empty once). A few bytes once at start-up, before any
            # other work: not worth a thread hop.
            document = json.dumps({"address": address, "brokers": [s.broker_id for s in specs]}) + "\n"
            atomic_write(ready_file, document.encode())
        click.echo(f"fleet of {len(specs)} brokers running; control service at {address}", err=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await fleet_.stop()
        await server.stop(grace=1.0)


@brokers.command("register")
@bootstrap_options
@click.option("--id", "broker_id", type=BROKER_ID, required=True, help="Broker id.")
@click.option("--rack", default=None, help="Rack of the broker.")
@click.option("--pool", default=None, help="Broker pool of the broker.")
@output_option
def register(
    bootstrap_server: str, timeout: float, broker_id: int, rack: str | None, pool: str | None, output: str
) -> None:
    """Register one broker (it stays fenced until something heartbeats for it)."""
    request = controller_pb2.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=uuid.uuid4().bytes)
    if rack is not None:
        request.rack = rack
    if pool is not None:
        request.pool = pool
    with connect(bootstrap_server, timeout) as client:
        response = client.register_broker(request)
    document = {
        "id": broker_id,
        "broker_epoch": response.broker_epoch,
        "error_code": error_name(response.error_code),
        "error_message": response.error_message,
    }
    if output == "json":
        emit_json(document)
    elif document["error_code"] == "NONE":
        click.echo(f"Broker {broker_id} registered with epoch {response.broker_epoch}.")
    if document["error_code"] != "NONE":
        raise CheckFailed(f"broker {broker_id} not registered: {document['error_code']}: {response.error_message}")


def broker_rows(response: controller_pb2.DescribeClusterResponse) -> list[dict[str, object]]:
    return [
        {
            "id": b.broker_id,
            "rack": b.rack if b.HasField("rack") else None,
            "pool": b.pool if b.HasField("pool") else None,
            "fenced": b.fenced,
            "epoch": b.broker_epoch,
        }
        for b in sorted(response.brokers, key=lambda b: b.broker_id)
    ]


@brokers.command("list")
@bootstrap_options
@output_option
def list_brokers(bootstrap_server: str, timeout: float, output: str) -> None:
    """List registered brokers with rack, pool, fenced state and epoch."""
    with connect(bootstrap_server, timeout) as client:
        response = client.describe_cluster()
    rows = broker_rows(response)
    if output == "json":
        emit_json({"cluster_id": response.cluster_id, "controller_id": response.controller_id, "brokers": rows})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"Brokers (controller {response.controller_id})")
    for column in ("id", "rack", "pool", "fenced", "epoch"):
        table.add_column(column, justify="right" if column in ("id", "epoch") else "left")
    for row in rows:
        table.add_row(*("-" if row[c] is None else str(row[c]) for c in ("id", "rack", "pool", "fenced", "epoch")))
    Console().print(table)


def _fleet_call(
    bootstrap_server: str, timeout: float, method: str, broker_ids: tuple[int, ...]
) -> fleet_pb2.FleetStatus:
    with connect(bootstrap_server, timeout) as client:
        cluster = client.describe_cluster()
    addresses: set[str] = set()
    for broker in cluster.brokers:
        if broker.broker_id in broker_ids:
            addresses.update(f"{e.host}:{e.port}" for e in broker.endpoints if e.name == FLEET_ENDPOINT)
    known = {b.broker_id for b in cluster.brokers}
    missing = sorted(set(broker_ids) - known)
    if missing:
        raise CheckFailed(f"brokers {missing} are not registered")
    if len(addresses) != 1:
        raise CheckFailed(
            f"brokers {sorted(broker_ids)} are not all run by one simulated fleet "
            f"(fleet endpoints found: {sorted(addresses) or 'none'})"
        )
    (address,) = addresses
    with grpc.insecure_channel(address, options=grpc_channel_options()) as channel:
        stub = fleet_pb2_grpc.BrokerFleetServiceStub(channel)
        try:
            status: fleet_pb2.FleetStatus = getattr(stub, method)(
                fleet_pb2.FleetBrokerIds(broker_ids=list(broker_ids)), timeout=timeout
            )
        except grpc.RpcError as exc:
            raise CheckFailed(
                f"fleet at {address}: {exc.code().name}: {exc.details()}",
                code=exc.code().name,
                details={"method": method, "grpc_status": exc.code().name},
            ) from exc
    return status


def _print_fleet_result(status: fleet_pb2.FleetStatus, broker_ids: tuple[int, ...], verb: str, output: str) -> None:
    chosen = [b for b in status.brokers if b.broker_id in broker_ids]
    if output == "json":
        emit_json(
            {
                "brokers": [
                    {"id": b.broker_id, "failed": b.failed, "fenced": b.fenced, "shut_down": b.shut_down}
                    for b in chosen
                ]
            }
        )
    else:
        for b in chosen:
            click.echo(f"Broker {b.broker_id} {verb}.")


@brokers.command("fail")
@bootstrap_options
@click.option("--id", "broker_ids", type=BROKER_ID, multiple=True, required=True, help="Broker to fail; repeatable.")
@output_option
def fail(bootstrap_server: str, timeout: float, broker_ids: tuple[int, ...], output: str) -> None:
    """Stop a simulated broker's heartbeats: the controller fences it after its session timeout."""
    status = _fleet_call(bootstrap_server, timeout, "FailBrokers", broker_ids)
    _print_fleet_result(status, broker_ids, "failed: heartbeats stopped, fencing follows the session timeout", output)


@brokers.command("recover")
@bootstrap_options
@click.option("--id", "broker_ids", type=BROKER_ID, multiple=True, required=True,
              help="Broker to recover; repeatable.")  # fmt: skip
@output_option
def recover(bootstrap_server: str, timeout: float, broker_ids: tuple[int, ...], output: str) -> None:
    """Resume a simulated broker's heartbeats: the controller unfences it."""
    status = _fleet_call(bootstrap_server, timeout, "RecoverBrokers", broker_ids)
    _print_fleet_result(status, broker_ids, "recovered: heartbeats resumed", output)


@brokers.command("shutdown")
@bootstrap_options
@click.option("--id", "broker_ids", type=BROKER_ID, multiple=True, required=True,
              help="Broker to shut down; repeatable.")  # fmt: skip
@output_option
def shutdown(bootstrap_server: str, timeout: float, broker_ids: tuple[int, ...], output: str) -> None:
    """Controlled shutdown (Kafka's): the controller moves the broker's leaderships away and takes
    it out of every ISR it is not the last member of, then the broker stops heartbeating. Unlike
    ``fail``, no partition waits a session timeout for a new leader. ``recover`` restarts it."""
    status = _fleet_call(bootstrap_server, timeout, "ShutdownBrokers", broker_ids)
    _print_fleet_result(status, broker_ids, "shut down: leaderships moved, out of its ISRs, stopped", output)


@brokers.command("unregister")
@bootstrap_options
@click.option("--id", "broker_id", type=BROKER_ID, required=True, help="Broker to unregister.")
@click.option("--request-id", default=None, help="Idempotency key: a retry with the same id is answered, not redone.")
@output_option
def unregister(bootstrap_server: str, timeout: float, broker_id: int, request_id: str | None, output: str) -> None:
    """Unregister a broker that is gone for good (Kafka's UnregisterBroker): it leaves every ISR
    and its registration is removed. Its replicas stay in the partitions' replica lists: move them
    with ``reassign``. A fleet broker that still heartbeats registers again."""
    request = controller_pb2.UnregisterBrokerRequest(broker_id=broker_id, request_id=request_id or "")
    with connect(bootstrap_server, timeout) as client:
        response = client.unregister_broker(request)
    document = {
        "id": broker_id,
        "error_code": error_name(response.error_code),
        "error_message": response.error_message,
    }
    if output == "json":
        emit_json(document)
    elif document["error_code"] == "NONE":
        click.echo(f"Broker {broker_id} unregistered.")
    if document["error_code"] != "NONE":
        raise CheckFailed(f"broker {broker_id} not unregistered: {document['error_code']}: {response.error_message}")
