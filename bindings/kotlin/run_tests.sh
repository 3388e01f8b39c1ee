#!/usr/bin/env bash
# Runs the Kotlin bindings' JUnit tests (bindings/kotlin, Maven) against a real
# aggregator: builds ldpcov-ffi and the daemon, generates the Kotlin sources into a
# build directory, starts `serve --memory` unless LDPCOV_URL names an aggregator, and
# runs `mvn -q -B test`. Exits non-zero on any failure.
#
# `cargo test -p ldpcov-ffi` runs this script too (bindings/tests/kotlin.rs), with
# LDPCOV_FFI_LIB and UNIFFI_BINDGEN naming what its own build made (no cargo call from
# inside cargo), LDPCOV_URL an in-process aggregator and LDPCOV_KOTLIN_BUILD_DIR a
# directory under cargo's target directory (kept between runs: Maven's incremental
# state). MVN picks the Maven command (default mvn).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mvn=${MVN:-mvn}

if [[ -z "${LDPCOV_FFI_LIB:-}" ]]; then
    cargo build -p ldpcov-ffi -p ldpcov-cli --manifest-path "$root/Cargo.toml"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    case "$(uname -s)" in
        Darwin) export LDPCOV_FFI_LIB="$target/debug/libldpcov_ffi.dylib" ;;
        *) export LDPCOV_FFI_LIB="$target/debug/libldpcov_ffi.so" ;;
    esac
    export UNIFFI_BINDGEN="$target/debug/uniffi-bindgen"
    aggregator=${LDPCOV_AGGREGATOR_BIN:-$target/debug/ldpcov-aggregator}
    build_dir=${LDPCOV_KOTLIN_BUILD_DIR:-$target/kotlin-bindings}
else
    build_dir=${LDPCOV_KOTLIN_BUILD_DIR:?LDPCOV_KOTLIN_BUILD_DIR must be set with LDPCOV_FFI_LIB}
fi

command -v java >/dev/null || { echo "java is not installed (the Kotlin tests need a JDK 17+)" >&2; exit 1; }
command -v "$mvn" >/dev/null || { echo "$mvn is not installed (the Kotlin tests need Maven)" >&2; exit 1; }

# Regenerated every run (the library may have changed); Maven recompiles what changed.
rm -rf "$build_dir/generated"
mkdir -p "$build_dir/generated"
"$root/bindings/generate.sh" --out "$build_dir/generated" kotlin >/dev/null

daemon_pid=
cleanup() { [[ -n $daemon_pid ]] && kill "$daemon_pid" 2>/dev/null; true; }
trap cleanup EXIT
if [[ -z "${LDPCOV_URL:-}" ]]; then
    log="$build_dir/aggregator.log"
    "$aggregator" serve --memory --listen 127.0.0.1:0 --log info 2>"$log" >/dev/null &
    daemon_pid=$!
    for _ in $(seq 300); do
        addr=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/.*ldpcov aggregator listening.*addr=\([^ ]*\).*/\1/p' | head -1)
        [[ -n $addr ]] && break
        sleep 0.1
    done
    [[ -n $addr ]] || { echo "the aggregator did not announce its address:" >&2; cat "$log" >&2; exit 1; }
    export LDPCOV_URL="http://$addr"
fi

cd "$here"
"$mvn" -q -B test \
    -Dldpcov.generated.dir="$build_dir/generated/kotlin" \
    -Dldpcov.library.dir="$(dirname "$LDPCOV_FFI_LIB")" \
    -Dldpcov.build.dir="$build_dir/maven"
