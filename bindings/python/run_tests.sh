#!/usr/bin/env bash
# Runs the Python bindings' end-to-end test (test_ldpcov.py) against a real aggregator:
# builds ldpcov-ffi and the daemon, generates the ldpcov_ffi module into a temporary
# directory, packs it into a wheel (build_wheel.py), installs the wheel into a fresh
# virtual environment (with numpy from PyPI), and runs the test there. Exits non-zero
# on any failure.
#
# `cargo test -p ldpcov-ffi` runs this script too (bindings/tests/languages/python.rs), with
# LDPCOV_FFI_LIB and UNIFFI_BINDGEN naming what its own build made (no cargo call
# from inside cargo), LDPCOV_URL naming an in-process aggregator and LDPCOV_RELAY_URL,
# LDPCOV_RELAY_MIN_BATCH and LDPCOV_RELAY_DEVICE_TOKENS an in-process ldpcov-relay in
# front of it (the shuffled collection's test skips without them). PYTHON picks the
# interpreter (default python3).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-python3}

if [[ -z "${LDPCOV_FFI_LIB:-}" ]]; then
    cargo build -p ldpcov-ffi -p ldpcov-aggregator-cli --manifest-path "$root/Cargo.toml"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    case "$(uname -s)" in
        Darwin) export LDPCOV_FFI_LIB="$target/debug/libldpcov_ffi.dylib" ;;
        *) export LDPCOV_FFI_LIB="$target/debug/libldpcov_ffi.so" ;;
    esac
    export UNIFFI_BINDGEN="$target/debug/uniffi-bindgen"
    export LDPCOV_AGGREGATOR_BIN=${LDPCOV_AGGREGATOR_BIN:-$target/debug/ldpcov-aggregator}
fi

module_dir=$(mktemp -d)
trap 'rm -rf "$module_dir"' EXIT
"$root/bindings/generate.sh" --out "$module_dir" python >/dev/null
export LDPCOV_PY_MODULE_DIR="$module_dir/python"

# The package as users install it: a wheel of the generated module and the library,
# installed into a fresh virtual environment, where the test then runs (and checks that
# it imported the installed package).
wheel=$("$python" "$here/build_wheel.py" "$module_dir/python" --out "$module_dir/dist")
"$python" -m venv "$module_dir/venv"
venv_python="$module_dir/venv/bin/python"
"$venv_python" -m pip install --quiet --no-index "$wheel"
if ! "$venv_python" -m pip install --quiet numpy; then
    echo "warning: numpy could not be installed; the numpy check will be skipped" >&2
fi

LDPCOV_PY_MODULE_DIR= LDPCOV_PY_FROM_WHEEL=1 "$venv_python" "$here/test_ldpcov.py"
