"""Regenerate the Python stubs from proto/ into client/python/loopwarden/v1/ (the one place they live).

Usage: python scripts/gen_proto.py [--out DIR]
The freshness test runs this into a temporary directory and compares byte for byte.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
PROTO_FILES = ["loopwarden/v1/loopwarden.proto"]
DEFAULT_OUT = ROOT / "client" / "python"


def generate(out_dir: pathlib.Path) -> list[pathlib.Path]:
    """Run grpc_tools.protoc for every contract file; return the files it wrote."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *PROTO_FILES,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    written = []
    for proto in PROTO_FILES:
        stem = pathlib.Path(proto).with_suffix("")
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            written.append(out_dir / f"{stem}{suffix}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path.relative_to(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
