"""Generate the Python protobuf and gRPC code (with mypy stubs) from proto/raftmeta/v1/*.proto.

The generated modules are committed under raftmeta/v1/ so that `pip install .` needs no
compiler. `make proto` runs this script; tests/test_proto_generated.py runs it into a temporary
directory and fails when the committed code differs from what the .proto files produce.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PROTO_FILES = sorted((PROTO_ROOT / "raftmeta" / "v1").glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Compile every .proto into out_dir (which receives raftmeta/v1/...); return the files written."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    # protoc finds the mypy plugins (protoc-gen-mypy, protoc-gen-mypy_grpc) on PATH: use this interpreter's.
    bin_dir = str(Path(sys.executable).parent)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={well_known}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *(str(p.relative_to(PROTO_ROOT)) for p in PROTO_FILES),
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code}")
    return sorted((out_dir / "raftmeta" / "v1").glob("*_pb2*.py*"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT.parent
    for path in generate(target):
        print(path.relative_to(target))
