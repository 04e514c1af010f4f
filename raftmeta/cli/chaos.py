"""``raftmeta chaos``: break a real quorum under load on purpose, then prove nothing acknowledged
was lost (docs/chaos.md)."""

from __future__ import annotations

import random
from pathlib import Path

import click

from raftmeta.cli.common import EXIT_FAILED, SEED, CheckFailed, emit_json, int_range, output_option, usage_error

# The default, nemesis.DEFAULT_FAMILIES (not imported: it would load grpc for --help); membership is opted into;
# with --kafka-brokers, kafka-broker replaces broker (nemesis.default_families).
FAULT_KINDS = "kill,pause,partition,torn-write,storage,broker"
ALL_FAULT_KINDS = f"{FAULT_KINDS},membership,kafka-broker"


@click.command()
@click.option("--nodes", type=click.Choice(["3", "5"]), default="3", show_default=True, help="Quorum size.")
@click.option("--duration", type=click.FloatRange(min=5), default=60.0, show_default=True,
              help="Seconds of the fault phase (workload + nemesis).")  # fmt: skip
@click.option("--faults", default=None,
              help=f"Comma-separated fault kinds, of {ALL_FAULT_KINDS} [default: {FAULT_KINDS}; with "
                   "--kafka-brokers, kafka-broker in place of broker].")  # fmt: skip
@click.option("--observers", type=int_range(0, 4), default=None,
              help="Nodes started as observers besides the voters [default: 1 with membership, else 0].")  # fmt: skip
@click.option("--clients", type=int_range(1, 64), default=8, show_default=True)
@click.option("--seed", type=SEED, default=None, help="Seed of the fault plan and workload (default: random).")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Where report.json, report.html, timeline.png, history.jsonl and the nodes' data go.")  # fmt: skip
@click.option("--brokers", type=int_range(3, 100), default=6, show_default=True, help="Simulated brokers.")
@click.option("--kafka-brokers", type=int_range(0, 9), default=0, show_default=True,
              help="Real Apache Kafka brokers (the pinned release, `make kafka`) instead of the simulated ones: "
                   "a produce/consume workload through them joins the run, and each one's metadata is checked "
                   "against the committed log (0: the simulated fleet).")  # fmt: skip
@click.option("--snapshot-interval-records", type=int_range(1), default=1000, show_default=True)
@click.option("--convergence-timeout", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Seconds allowed after the heal for every node to catch up.")  # fmt: skip
@click.option("--spark/--no-spark", default=True, show_default=True, help="Run the Spark verify job with the history.")
@click.option("--unsafe-ack-before-commit", is_flag=True, hidden=True, help="TEST ONLY: nodes ack before commit.")
@click.option("--unsafe-skip-fsync", is_flag=True, hidden=True, help="TEST ONLY: nodes never fsync.")
@output_option
def chaos(
    nodes: str,
    duration: float,
    faults: str | None,
    observers: int | None,
    clients: int,
    seed: int | None,
    report_dir: Path,
    brokers: int,
    kafka_brokers: int,
    snapshot_interval_records: int,
    convergence_timeout: float,
    spark: bool,
    unsafe_ack_before_commit: bool,
    unsafe_skip_fsync: bool,
    output: str,
) -> None:
    """Run real nodes behind fault-injecting proxies under a concurrent workload, inject faults
    from a seed, heal, and check convergence, the client history and (with Spark) every log.

    Exits 0 when every check passes and 1 on any violation.
    """
    from raftmeta.chaos.cluster import ClusterConfig
    from raftmeta.chaos.nemesis import check_broker_families, default_families, parse_families
    from raftmeta.chaos.report import write_report
    from raftmeta.chaos.runner import ChaosConfig, default_observers, run_chaos

    if kafka_brokers and kafka_brokers < 3:
        raise usage_error(f"--kafka-brokers must be 0 or between 3 and 9 (replication factor 3), got {kafka_brokers}",
                          "--kafka-brokers")  # fmt: skip
    if kafka_brokers and (unsafe_ack_before_commit or unsafe_skip_fsync):
        raise usage_error("the test-only unsafe flags run with the simulated brokers only", "--kafka-brokers")
    try:
        families = default_families(kafka_brokers) if faults is None else tuple(parse_families(faults))
        check_broker_families(families, kafka_brokers)
    except ValueError as exc:
        raise usage_error(str(exc), "--faults") from exc
    chosen_seed = seed if seed is not None else random.randrange(1 << 31)
    config = ChaosConfig(
        seed=chosen_seed,
        report_dir=report_dir,
        duration_s=duration,
        families=families,
        cluster=ClusterConfig(
            nodes=int(nodes),
            observers=default_observers(families) if observers is None else observers,
            brokers=brokers,
            kafka_brokers=kafka_brokers,
            snapshot_interval_records=snapshot_interval_records,
            unsafe_ack_before_commit=unsafe_ack_before_commit,
            unsafe_skip_fsync=unsafe_skip_fsync,
        ),
        clients=clients,
        convergence_timeout_s=convergence_timeout,
        spark=spark,
    )
    click.echo(f"chaos seed {chosen_seed}; reproduce with: {config.reproduce()}", err=True)
    try:
        result = run_chaos(config, echo=lambda line: click.echo(line, err=True))
    except FileExistsError as exc:
        raise usage_error(str(exc), "--report-dir") from exc
    except (RuntimeError, TimeoutError, OSError) as exc:
        # The cluster never got going (a node or the fleet would not start): no verdict to give.
        raise CheckFailed(f"chaos run aborted before its checks: {exc}") from exc
    paths = write_report(result)
    document = result.to_json()
    if output == "json":
        emit_json({k: document[k] for k in document if k not in ("events", "figures", "checks")} |
                  {"report": {name: str(p) for name, p in paths.items()}})  # fmt: skip
    else:
        _print_summary(document, paths)
    if not result.passed:
        raise SystemExit(EXIT_FAILED)


def _moves(counts: object) -> str:
    assert isinstance(counts, dict)
    return (
        f"started {counts['started']}  completed {counts['completed']}  cancelled {counts['cancelled']}  "
        f"(re-targeted {counts['retargeted']}, dropped with their topic {counts['dropped_with_topic']}, "
        f"in flight at the end {counts['in_flight_at_end']})"
    )


def _voters(changes: object) -> str:
    assert isinstance(changes, dict)
    if not changes:
        return ""
    return (
        f"  voters {changes['bootstrap']} -> {changes['final']}  "
        f"(changes acknowledged {changes['acknowledged']} of {changes['requests']} requests)\n"
    )


def _print_summary(document: dict[str, object], paths: dict[str, Path]) -> None:
    ops = document["ops"]
    assert isinstance(ops, dict)
    click.echo(
        f"raftmeta chaos: {'PASSED' if document['passed'] else 'FAILED'} (seed {document['seed']})\n"
        f"  ops ok {ops['ok']}  fail {ops['fail']}  unknown {ops['unknown']}  "
        f"lost acknowledged {document['lost_acknowledged']}\n"
        f"  faults {document['faults']}\n"
        f"  reassignments {_moves(document['reassignments'])}\n"
        f"{_voters(document['voter_changes'])}"
        f"  longest without an ok op {document['longest_unavailable_ms']} ms; "
        f"converged {document['converged_ms']} ms after the heal"
    )
    kafka = document["kafka"]
    if isinstance(kafka, dict):
        data = kafka["data"]
        if data:
            click.echo(
                f"  Kafka data: sent {data['sent']}  acknowledged {data['acknowledged']}  failed {data['failed']}  "
                f"in the log {data['in_log']}  received by the group {data['group_received']}"
            )
        for broker in kafka["brokers"]:
            converged = broker["converged_ms"]
            click.echo(
                f"  Kafka broker {broker['broker_id']}: metadata "
                + (
                    f"converged to the committed image in {converged} ms"
                    if converged is not None
                    else "DID NOT converge"
                )
            )
    violations = document["violations"]
    assert isinstance(violations, list)
    for violation in violations:
        click.echo(f"  VIOLATION {violation}")
    click.echo(f"  report: {paths['html']}")
    if "linearizability_timeline" in paths:
        click.echo(f"  timeline of the failing window: {paths['linearizability_timeline']}")
