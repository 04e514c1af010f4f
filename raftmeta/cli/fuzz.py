"""``raftmeta fuzz``: fuzz the ControllerService of a real quorum and the batch/segment decoder
for a while, then report (docs/security.md, Fuzzing)."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from raftmeta.cli.common import EXIT_FAILED, SEED, CheckFailed, emit_json, output_option, usage_error

TARGETS = ("controller", "decoder", "kafka", "all")
# Outcomes printed per target in the text summary (JSON has them all).
OUTCOMES_SHOWN = 12


@click.command()
@click.option("--target", type=click.Choice(TARGETS), default="all", show_default=True, help="What to fuzz.")
@click.option("--duration", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Seconds of fuzzing; the controller's final checks (stop, replay the logs) come after.")  # fmt: skip
@click.option("--seed", type=SEED, default=None, help="Seed of the first round (default: random); round k uses seed+k.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the controller target runs its quorum (new or empty). Default: a temporary "
              "directory, kept only when the run fails.")  # fmt: skip
@click.option("--nodes", type=click.Choice(["1", "3", "5"]), default="3", show_default=True,
              help="Voters of the controller target's quorum.")  # fmt: skip
@output_option
def fuzz(target: str, duration: float, seed: int | None, data_dir: Path | None, nodes: str, output: str) -> None:
    """Send fuzzed requests to every ControllerService method of a real local quorum, and feed
    random and damaged batches to the batch decoder, segment recovery and segment reads, and
    damaged Kafka requests to the Kafka listeners of a second quorum (docs/kafka-protocol.md).

    A failure is a reply that is neither a success nor a defined error, a node that dies or logs
    an error, a log that does not replay cleanly, or a decoder outcome other than valid batches or
    a corruption error at the right place. Exits 0 when there is none and 1 otherwise.
    """
    from raftmeta.fuzz.controller import ControllerFuzzConfig, ControllerFuzzer
    from raftmeta.fuzz.kafka import KafkaFuzzer
    from raftmeta.fuzz.runner import DecoderFuzzer, Target, run_rounds

    if data_dir is not None and data_dir.exists() and any(data_dir.iterdir()):
        raise usage_error(f"{data_dir} is not empty: the fuzz needs a fresh quorum", "--data-dir")
    chosen_seed = seed if seed is not None else random.randrange(1 << 31)
    click.echo(
        f"fuzz seed {chosen_seed}; reproduce with: raftmeta fuzz --target {target} --seed {chosen_seed}", err=True
    )
    targets: list[Target] = []
    if target in ("decoder", "all"):
        targets.append(DecoderFuzzer())
    controller: ControllerFuzzer | None = None
    kafka: KafkaFuzzer | None = None
    workdir = data_dir if data_dir is not None else Path(tempfile.mkdtemp(prefix="raftmeta-fuzz-"))
    passed = False
    try:
        if target in ("controller", "all"):
            controller = ControllerFuzzer(workdir, ControllerFuzzConfig(nodes=int(nodes)))
            click.echo(f"starting a {nodes}-node quorum in {workdir}", err=True)
            try:
                controller.start()
            except (RuntimeError, TimeoutError, OSError) as exc:
                raise CheckFailed(f"the quorum did not start: {exc}") from exc
            targets.append(controller)
        if target in ("kafka", "all"):
            # Its own quorum (no brokers, so that only its frames could write): the high
            # watermark tells whether a refused frame wrote anything.
            kafka = KafkaFuzzer(workdir / "kafka", nodes=int(nodes))
            click.echo(f"starting a {nodes}-node quorum with Kafka listeners in {workdir / 'kafka'}", err=True)
            try:
                kafka.start()
            except (RuntimeError, TimeoutError, OSError) as exc:
                raise CheckFailed(f"the quorum did not start: {exc}") from exc
            targets.append(kafka)
        result = run_rounds(targets, duration_s=duration, seed=chosen_seed, progress=lambda s: click.echo(s, err=True))
        passed = result.passed
    finally:
        if controller is not None:
            controller.close()
        if kafka is not None:
            kafka.close()
        if data_dir is None and (passed or (controller is None and kafka is None)):
            shutil.rmtree(workdir, ignore_errors=True)
        elif controller is not None or kafka is not None:
            click.echo(f"quorum data and logs kept in {workdir}", err=True)
    document = result.to_json()
    if output == "json":
        emit_json(document)
    else:
        _print_summary(document)
    if not result.passed:
        raise SystemExit(EXIT_FAILED)


def _print_summary(document: dict[str, Any]) -> None:
    verdict = "PASSED" if document["passed"] else "FAILED"
    click.echo(
        f"raftmeta fuzz: {verdict} (seed {document['seed']}, {document['rounds']} rounds, {document['duration_s']} s)"
    )
    for target in document["targets"]:
        click.echo(f"  {target['name']}: {target['examples']} examples, {target['failures_total']} failures")
        outcomes = sorted(target["outcomes"].items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{name} {count}" for name, count in outcomes[:OUTCOMES_SHOWN])
        more = len(outcomes) - OUTCOMES_SHOWN
        click.echo(f"    {shown}" + (f" (+{more} more)" if more > 0 else ""))
        for failure in target["failures"]:
            click.echo(f"  FAILURE [{target['name']}/{failure['kind']}] {failure['message']} (x{failure['count']})")
            for key in ("method", "node", "request", "request_hex", "reply", "case"):
                if key in failure:
                    click.echo(f"      {key}: {failure[key]}")
