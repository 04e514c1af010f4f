"""The committed generated code (raftmeta/v1) must be exactly what the .proto files produce."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_matches_proto_files(tmp_path: Path) -> None:
    generated = load_generator().generate(tmp_path)
    assert generated, "protoc produced nothing"
    fresh = {p.name: p.read_bytes() for p in generated}
    committed = {p.name: p.read_bytes() for p in (ROOT / "raftmeta" / "v1").glob("*_pb2*.py*")}
    assert sorted(fresh) == sorted(committed), "generated file set differs: run `make proto`"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert stale == [], f"stale generated code, run `make proto`: {stale}"
