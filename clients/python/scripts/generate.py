#!/usr/bin/env python3
"""Generates the gRPC stubs under src/ldpcov/v1 from the repository's .proto.

    python scripts/generate.py          # rewrite src/ldpcov/v1/ldpcov_pb2{,_grpc}.py{,i}
    python scripts/generate.py --check  # regenerate into a temporary directory and
                                        # fail if the committed files differ

Needs grpcio-tools at exactly GRPCIO_TOOLS (the stubs record the versions they were
generated with, and the package's minimum grpcio/protobuf follow them):

    python -m pip install grpcio-tools==1.85.1

The proto's package is `ldpcov.v1`, so protoc writes `ldpcov/v1/ldpcov_pb2.py` and the
service stub imports `from ldpcov.v1 import ldpcov_pb2`: that is this package's own
`ldpcov.v1` subpackage, so no import rewriting is needed.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

GRPCIO_TOOLS = "1.85.1"

HERE = Path(__file__).resolve().parent.parent
PROTO_ROOT = HERE.parent.parent / "proto" / "proto"
PROTO = "ldpcov/v1/ldpcov.proto"
SRC = HERE / "src"
GENERATED = [
    "ldpcov/v1/ldpcov_pb2.py",
    "ldpcov/v1/ldpcov_pb2.pyi",
    "ldpcov/v1/ldpcov_pb2_grpc.py",
]


def _protoc(out: Path) -> None:
    try:
        from importlib.metadata import version

        from grpc_tools import protoc
    except ImportError:
        sys.exit(
            f"grpcio-tools is not installed: python -m pip install grpcio-tools=={GRPCIO_TOOLS}"
        )
    found = version("grpcio-tools")
    if found != GRPCIO_TOOLS:
        sys.exit(
            f"grpcio-tools {found} is installed, the stubs are generated with {GRPCIO_TOOLS}: "
            f"python -m pip install grpcio-tools=={GRPCIO_TOOLS}"
        )
    import importlib.resources

    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            PROTO,
        ]
    )
    if code != 0:
        sys.exit(f"protoc failed ({code}) on {PROTO_ROOT / PROTO}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare freshly generated stubs with the committed ones instead of writing",
    )
    args = parser.parse_args()
    if not args.check:
        _protoc(SRC)
        print(f"generated {', '.join(GENERATED)} under {SRC}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(Path(tmp))
        stale = [
            name
            for name in GENERATED
            if not (SRC / name).is_file()
            or not filecmp.cmp(Path(tmp) / name, SRC / name, shallow=False)
        ]
    if stale:
        sys.exit(
            "the committed Python stubs differ from what "
            f"{PROTO} generates: {', '.join(stale)}. "
            "Run `python clients/python/scripts/generate.py` "
            f"(grpcio-tools=={GRPCIO_TOOLS}) and commit the result."
        )
    print(f"the Python stubs match {PROTO} (grpcio-tools {GRPCIO_TOOLS})")


if __name__ == "__main__":
    main()
