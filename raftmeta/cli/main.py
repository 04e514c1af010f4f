"""Entry point of the ``raftmeta`` command.

Subcommands live in their own modules and are imported only when used (``LazyGroup``), so
``raftmeta --help`` and quick commands do not pay for pyspark, grpc or matplotlib imports.
Register a new command group by adding one line to ``COMMANDS``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import click

from raftmeta import __version__
from raftmeta.cli.common import EXIT_FAILED, emit_json, emitted, error_document, json_requested
from raftmeta.logs import LOG_LEVELS, configure_logging

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


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

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


@click.group(cls=RootGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="raftmeta")
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
    configure_logging(log_level, log_format)  # type: ignore[arg-type]


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="raftmeta")
    except KeyboardInterrupt:
        raise SystemExit(EXIT_FAILED) from None
