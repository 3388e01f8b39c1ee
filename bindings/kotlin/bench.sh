#!/usr/bin/env bash
# The time to build one report on the JVM through the Kotlin bindings, per mechanism
# (Gaussian svec, Gaussian triu, rank-one; epsilon 1) at p = 10, 100, 1000, without an
# aggregator: builds ldpcov-ffi in release mode, generates the Kotlin sources, and runs
# src/bench/kotlin/org/ldpcov/ffi/ReportBench.kt (Maven profile `bench`, exec-maven-plugin)
# against the release library. Prints a Markdown table (docs/BENCHMARKS.md) and the
# machine's load. Not part of `cargo test`; it takes about a minute after the build.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mvn=${MVN:-mvn}

command -v java >/dev/null || { echo "java is not installed (a JDK 17+ is needed)" >&2; exit 1; }
command -v "$mvn" >/dev/null || { echo "$mvn is not installed" >&2; exit 1; }

cargo build --release -p ldpcov-ffi --manifest-path "$root/Cargo.toml"
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
case "$(uname -s)" in
    Darwin) library="$target/release/libldpcov_ffi.dylib" ;;
    *) library="$target/release/libldpcov_ffi.so" ;;
esac
build_dir="$target/kotlin-bench"
rm -rf "$build_dir/generated"
mkdir -p "$build_dir/generated"
LDPCOV_FFI_LIB=$library UNIFFI_BINDGEN="$target/release/uniffi-bindgen" \
    "$root/bindings/generate.sh" --out "$build_dir/generated" kotlin >/dev/null

echo "load before: $(uptime)"
cd "$here"
"$mvn" -q -B -Pbench test-compile exec:exec \
    -Dldpcov.generated.dir="$build_dir/generated/kotlin" \
    -Dldpcov.library.dir="$(dirname "$library")" \
    -Dldpcov.library.file="$(basename "$library")" \
    -Dldpcov.build.dir="$build_dir/maven"
echo "load after: $(uptime)"
