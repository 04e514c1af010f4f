"""Build and run the Porcupine checker of tests/porcupine (a Go program) on histories.

A machine without ``go``, or where the module cannot be downloaded from the Go module proxy,
fails the test that needs it with what is missing: the differential check never skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from raftmeta.lincheck.codec import operation_to_json
from raftmeta.lincheck.model import Operation

SOURCE = Path(__file__).resolve().parent.parent / "porcupine"
BUILD_TIMEOUT_S = 600  # a fresh machine downloads the module through the proxy first
CHECK_TIMEOUT_S = 1_800


def build(out_dir: Path) -> Path:
    go = shutil.which("go")
    if go is None:
        pytest.fail("the Porcupine differential test needs Go (`go` on PATH) to build tests/porcupine", pytrace=False)
    binary = out_dir / "porcupine-check"
    # The committed go.sum pins the module: a download that does not match it fails the build.
    # No VCS stamp: a test tool, and a checkout without git metadata must build it too.
    env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false", "CGO_ENABLED": "0"}
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(
            f"`go build` of tests/porcupine failed (is the Go module proxy reachable?):\n{built.stderr}", pytrace=False
        )
    return binary


def verdicts(binary: Path, histories: Sequence[tuple[str, Sequence[Operation]]]) -> dict[str, str]:
    """Porcupine's verdict ("ok", "illegal" or "unknown") for each named history."""
    lines = "".join(
        json.dumps({"name": name, "ops": [operation_to_json(op) for op in ops]}) + "\n" for name, ops in histories
    )
    ran = subprocess.run(
        [str(binary)], input=lines, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=False
    )
    if ran.returncode != 0:
        pytest.fail(f"porcupine-check exited with {ran.returncode}:\n{ran.stderr}", pytrace=False)
    answers = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    return {answer["name"]: answer["verdict"] for answer in answers}
