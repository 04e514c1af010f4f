"""Entry point of the ``raftmeta`` command.

Subcommands live in their own modules and are imported only when used (``LazyGroup``), so
``raftmeta --help`` and quick commands do not pay for pyspark, grpc or matplotlib imports; the
help lists them from ``COMMAND_HELP`` without importing any (tests/test_cli_startup.py keeps it
equal to each command's own help). Register a new command group with one line in ``COMMANDS``
and its help's first paragraph in ``COMMAND_HELP``. Logging (structlog) is configured when a
command runs, not when the help is printed.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

import click

from raftmeta.cli.common import EXIT_FAILED, emit_json, emitted, error_document, json_requested

# --log-level choices (raftmeta.logs.configure_logging takes them).
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

# name -> "module:attribute" of a click.Command or click.Group. A command whose module is not
# built yet is simply not listed (see LazyGroup), so a part can be registered before it lands.
COMMANDS: dict[str, str] = {
    "bench": "raftmeta.cli.bench:bench",
    "brokers": "raftmeta.cli.brokers:brokers",
    "certs": "raftmeta.cli.certs:certs",
    "configs": "raftmeta.cli.configs:configs",
    "chaos": "raftmeta.cli.chaos:chaos",
    "demo": "raftmeta.cli.demo:demo",
    "fuzz": "raftmeta.cli.fuzz:fuzz",
    "kraft": "raftmeta.cli.kraft:kraft",
    "leader-election": "raftmeta.cli.leader_election:leader_election",
    "log": "raftmeta.cli.log:log",
    "node": "raftmeta.cli.node:node",
    "quorum": "raftmeta.cli.quorum:quorum",
    "placement": "raftmeta.cli.placement:placement",
    "reassign": "raftmeta.cli.reassign:reassign",
    "records": "raftmeta.cli.records:records",
    "sim": "raftmeta.cli.sim:sim",
    "topics": "raftmeta.cli.topics:topics",
    "verify": "raftmeta.cli.verify:verify",
}
# name -> the first paragraph of the command's help, as `raftmeta --help` lists it.
COMMAND_HELP: dict[str, str] = {
    "bench": "Measure raftmeta: each benchmark prints one JSON document of medians and ratios.",
    "brokers": "Simulated brokers: run a fleet, register, list, fail and recover brokers.",
    "certs": "Certificates for TLS (docs/security.md).",
    "configs": "Describe or alter topic configs (kafka-configs.sh).",
    "chaos": "Run real nodes behind fault-injecting proxies under a concurrent workload, inject faults from a seed, "
    "heal, and check convergence, the client history and (with Spark) every log.",
    "demo": "Run a 3-node quorum, create topics, break a broker, change the voters, and verify every log with Spark; "
    "then produce and consume through real Kafka brokers on a quorum, crash one of them, and verify that log too.",
    "fuzz": "Send fuzzed requests to every ControllerService method of a real local quorum, and feed random and "
    "damaged batches to the batch decoder, segment recovery and segment reads, and damaged Kafka requests to the "
    "Kafka listeners of a second quorum (docs/kafka-protocol.md).",
    "kraft": "Run a real Apache Kafka KRaft cluster (the pinned release's JVMs) on loopback.",
    "leader-election": "Elect partition leaders: preferred replicas, or unclean for leaderless partitions "
    "(kafka-leader-election.sh).",
    "log": "Inspect a node's replicated log and snapshots (dump), or truncate a damaged one (repair).",
    "node": "Run one quorum node (voter) in the foreground.",
    "quorum": "Run a local quorum of node processes on loopback and act on its nodes.",
    "placement": "Preview replica placement (Kafka's placers and raftmeta's balanced one) and consumer assignment.",
    "reassign": "Move partition replicas between brokers (kafka-reassign-partitions.sh).",
    "records": "The metadata record types (proto/raftmeta/v1/records.proto).",
    "sim": "Simulate quorums under seeded faults and check the consensus invariants.",
    "topics": "Create, list, describe, alter and delete topics (kafka-topics.sh flags).",
    "verify": "Replay every node's committed log with Spark and check that the quorum agreed.",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(
        self, *args: Any, lazy_commands: dict[str, str], listed_help: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands
        # Listing a command whose help is here does not import it.
        self.listed_help = dict(listed_help or {})

    def _built(self, cmd_name: str) -> bool:
        module_name = self.lazy_commands[cmd_name].split(":")[0]
        try:
            return importlib.util.find_spec(module_name) is not None
        except ModuleNotFoundError:
            return False

    def list_commands(self, ctx: click.Context) -> list[str]:
        built = {name for name in self.lazy_commands if self._built(name)}
        return sorted({*super().list_commands(ctx), *built})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and self._built(cmd_name):
            module_name, attribute = self.lazy_commands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, with the help of ``listed_help`` instead of importing the commands."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows: list[tuple[str, str]] = []
        for name in names:
            if name in self.listed_help:
                # Shortened by click's own rule, as the command would shorten it.
                stand_in = click.Command(name, help=self.listed_help[name])
                rows.append((name, stand_in.get_short_help_str(limit)))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


# The raw arguments of the invocation, for json_requested (click may fail before parsing --output).
_ARGS = "raftmeta.args"


class RootGroup(LazyGroup):
    """The ``raftmeta`` group: the one place where an error that ends a command becomes output.

    Click prints a usage error or a :class:`~raftmeta.cli.common.CheckFailed` (gRPC transport
    and limit errors arrive as one, see ``raftmeta.cli.connect``) on stderr and exits 2 or 1.
    With ``--output json`` this adds the JSON error object on stdout (unless the command already
    printed its document), so scripts always get JSON. Both parsing (a bad flag of any
    subcommand) and running go through here.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        raw = list(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            _report(exc, raw, None)
            raise
        ctx.meta[_ARGS] = raw
        return ctx

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            _report(exc, ctx.meta.get(_ARGS, []), ctx)
            raise


def _report(exc: click.ClickException, args: list[str], ctx: click.Context | None) -> None:
    if json_requested(args) and (ctx is None or not emitted(ctx)):
        emit_json(error_document(exc))


def _print_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from raftmeta import __version__  # read from the installed metadata: only when asked

    click.echo(f"raftmeta, version {__version__}")
    ctx.exit()


@click.group(
    cls=RootGroup,
    lazy_commands=COMMANDS,
    listed_help=COMMAND_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="warning",
    show_default=True,
    envvar="RAFTMETA_LOG_LEVEL",
    help="Least severe log level written to stderr.",
)
@click.option(
    "--log-format",
    type=click.Choice(["auto", "console", "json"]),
    default="auto",
    show_default=True,
    envvar="RAFTMETA_LOG_FORMAT",
    help="auto = console on a terminal, JSON lines otherwise.",
)
def cli(log_level: str, log_format: str) -> None:
    """raftmeta: a KRaft-style replicated metadata log you can run, break and verify.

    Exit codes: 0 ok, 1 a check failed or a request was rejected, 2 usage error.
    Every command takes --output json for scripts.
    """
    from raftmeta.logs import configure_logging

    configure_logging(log_level, log_format)  # type: ignore[arg-type]


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="raftmeta")
    except KeyboardInterrupt:
        raise SystemExit(EXIT_FAILED) from None
