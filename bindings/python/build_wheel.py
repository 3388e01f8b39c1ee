#!/usr/bin/env python3
"""Builds an installable wheel of the Python bindings from a generated module directory.

The directory is what ``bindings/generate.sh python`` writes: the uniffi-generated
``ldpcov_ffi.py`` and the shared library it loads (``libldpcov_ffi.so`` / ``.dylib``).
The wheel holds them as the package ``ldpcov_ffi`` (``__init__.py`` beside the library:
the generated code loads the library from its own directory), so ``import ldpcov_ffi``
works after ``pip install`` exactly as it does from the directory. The module talks to
the library through ctypes, not the CPython ABI, so the tag is ``py3-none-<platform>``.

    python3 bindings/python/build_wheel.py bindings/generated/python --out dist/
    pip install dist/ldpcov_ffi-0.1.0-py3-none-linux_x86_64.whl

Only the standard library is used (a wheel is a zip file with a dist-info directory,
PEP 427); ``bindings/python/run_tests.sh`` builds one, installs it into a fresh virtual
environment and runs the bindings' test against it.
"""

import argparse
import base64
import hashlib
import pathlib
import sys
import sysconfig
import zipfile

NAME = "ldpcov_ffi"
SUMMARY = (
    "ldpcov device client: local differential privacy reports of x x^T, "
    "built on the device (uniffi bindings of the Rust client)"
)


def record_line(path: str, data: bytes) -> str:
    """One RECORD row: path, urlsafe base64 sha256 without padding, size."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{path},sha256={digest.decode()},{len(data)}"


def build(module_dir: pathlib.Path, out: pathlib.Path, version: str) -> pathlib.Path:
    source = module_dir / f"{NAME}.py"
    libraries = [
        p for p in module_dir.iterdir() if p.name.startswith(f"lib{NAME}.") or p.name == f"{NAME}.dll"
    ]
    if not source.is_file():
        raise SystemExit(f"{source} not found: run bindings/generate.sh python first")
    if len(libraries) != 1:
        raise SystemExit(f"expected one lib{NAME} library in {module_dir}, found {len(libraries)}")
    library = libraries[0]
    platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"py3-none-{platform_tag}"
    dist_info = f"{NAME}-{version}.dist-info"
    files = {
        f"{NAME}/__init__.py": source.read_bytes(),
        f"{NAME}/{library.name}": library.read_bytes(),
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\n"
            f"Name: ldpcov-ffi\nVersion: {version}\nSummary: {SUMMARY}\n"
            "License: MIT OR Apache-2.0\nRequires-Python: >=3.8\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: ldpcov build_wheel.py\n"
            f"Root-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
    }
    record = [record_line(path, data) for path, data in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{NAME}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            # The library must stay executable once unpacked.
            info.external_attr = (0o755 if path.endswith(library.name) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module_dir", type=pathlib.Path, help="what generate.sh python wrote")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="directory for the wheel")
    parser.add_argument("--version", default="0.1.0")
    args = parser.parse_args()
    print(build(args.module_dir, args.out, args.version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
