"""The steps of ``raftmeta demo``: each prints its title and the command it runs, so a newcomer can
repeat any of them by hand, and a step that fails stops the tour (StepFailed)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import click

from raftmeta.local.python_command import raftmeta_command


class StepFailed(Exception):
    pass


def run(title: str, *argv: str, expect_failure: bool = False, capture: bool = False) -> str:
    click.secho(f"\n== {title}", bold=True)
    click.secho(f"$ raftmeta {' '.join(argv)}", fg="cyan")
    result = subprocess.run(raftmeta_command(*argv), text=True, capture_output=capture, check=False)
    if capture:
        click.echo(result.stdout, nl=False)
        if result.stderr:
            click.echo(result.stderr, nl=False, err=True)
    failed = result.returncode != 0
    if failed and not expect_failure:
        raise StepFailed(f"`raftmeta {' '.join(argv)}` exited with {result.returncode}")
    if expect_failure and not failed:
        raise StepFailed(f"`raftmeta {' '.join(argv)}` was expected to be rejected but succeeded")
    return result.stdout if capture else ""


def wait_for(ready: Callable[[], bool], timeout_s: float, failure: str, every_s: float = 1.0) -> None:
    """Until ``ready()``, checked every ``every_s``; StepFailed(``failure``) after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise StepFailed(failure)
        time.sleep(every_s)
