#!/usr/bin/env bash
# Runs the Kotlin bindings' JUnit tests (bindings/kotlin, Maven) against a real
# aggregator, then tests the packaged jar: builds ldpcov-ffi and the daemon, generates
# the Kotlin sources into a build directory, starts `serve --memory` unless LDPCOV_URL
# names an aggregator, and runs `mvn -q -B package` (the JUnit tests, then the jar with
# the native library inside, under JNA's resource path). The jar is then installed
# (`mvn install:install-file`) into a scratch local repository, and a scratch project
# (a copy of bindings/kotlin/package-test) that depends on it and on JNA sends one
# report from it, with no jna.library.path and no LD_LIBRARY_PATH. Exits non-zero on
# any failure.
#
# `cargo test -p ldpcov-ffi` runs this script too (bindings/tests/languages/kotlin.rs), with
# LDPCOV_FFI_LIB and UNIFFI_BINDGEN naming what its own build made (no cargo call from
# inside cargo), LDPCOV_URL an in-process aggregator, LDPCOV_RELAY_URL,
# LDPCOV_RELAY_MIN_BATCH and LDPCOV_RELAY_DEVICE_TOKENS an in-process ldpcov-relay in
# front of it (the shuffled collection's test needs them), and LDPCOV_KOTLIN_BUILD_DIR a
# directory under cargo's target directory (kept between runs: Maven's incremental
# state, and the scratch repository). MVN picks the Maven command (default mvn).
#
# The scratch repository ($build_dir/package-m2) is seeded once from ~/.m2/repository
# (MAVEN_USER_REPO overrides the path) when that exists, so that a warm machine
# downloads nothing; its org/ldpcov is removed on every run, so only this run's jar can
# be found there. ~/.m2 itself is not written by the package test.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mvn=${MVN:-mvn}

if [[ -z "${LDPCOV_FFI_LIB:-}" ]]; then
    cargo build -p ldpcov-ffi -p ldpcov-aggregator-cli --manifest-path "$root/Cargo.toml"
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

# JNA's resource prefix (com.sun.jna.Platform.RESOURCE_PREFIX): where in the jar the
# library goes for JNA to find it on the classpath.
case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) jna_prefix=linux-x86-64 ;;
    Linux/aarch64) jna_prefix=linux-aarch64 ;;
    Darwin/arm64) jna_prefix=darwin-aarch64 ;;
    Darwin/x86_64) jna_prefix=darwin-x86-64 ;;
    *) echo "no JNA resource prefix known for $(uname -s)/$(uname -m)" >&2; exit 1 ;;
esac

# The bindings' own tests, then the jar (package runs the tests first).
maven_dir="$build_dir/maven"
rm -f "$maven_dir"/*.jar
cd "$here"
"$mvn" -q -B package \
    -Dldpcov.generated.dir="$build_dir/generated/kotlin" \
    -Dldpcov.library.dir="$(dirname "$LDPCOV_FFI_LIB")" \
    -Dldpcov.library.file="$(basename "$LDPCOV_FFI_LIB")" \
    -Dldpcov.jna.prefix="$jna_prefix" \
    -Dldpcov.build.dir="$maven_dir"

# The versions the scratch project uses are this project's.
property() { sed -n "s:.*<$1>\(.*\)</$1>.*:\1:p" "$here/pom.xml" | head -1; }
version=$(sed -n '/<artifactId>ldpcov-ffi-kotlin<\/artifactId>/{n;s:.*<version>\(.*\)</version>.*:\1:p;}' "$here/pom.xml")
jar="$maven_dir/ldpcov-ffi-kotlin-$version.jar"
[[ -f $jar ]] || { echo "mvn package wrote no $jar" >&2; ls "$maven_dir" >&2; exit 1; }
jar tf "$jar" | grep -qx "$jna_prefix/$(basename "$LDPCOV_FFI_LIB")" ||
    { echo "$jar does not carry $jna_prefix/$(basename "$LDPCOV_FFI_LIB")" >&2; exit 1; }

# The scratch repository: seeded once, this project's artifacts removed every run.
repo="$build_dir/package-m2"
user_repo=${MAVEN_USER_REPO:-$HOME/.m2/repository}
if [[ ! -d $repo ]]; then
    mkdir -p "$repo.partial"
    [[ -d $user_repo ]] && cp -R "$user_repo/." "$repo.partial/"
    mv "$repo.partial" "$repo"
fi
rm -rf "$repo/org/ldpcov"
"$mvn" -q -B -Dmaven.repo.local="$repo" \
    org.apache.maven.plugins:maven-install-plugin:3.1.4:install-file \
    -Dfile="$jar" -DpomFile="$here/pom.xml"

# The scratch project: a fresh copy, built against the scratch repository only, with
# nothing telling JNA where the build tree's library is.
app="$build_dir/package-test"
rm -rf "$app"
cp -R "$here/package-test" "$app"
cd "$app"
env -u LD_LIBRARY_PATH -u DYLD_LIBRARY_PATH "$mvn" -q -B test \
    -Dmaven.repo.local="$repo" \
    -Dldpcov.version="$version" \
    -Dkotlin.version="$(property kotlin.version)" \
    -Djna.version="$(property jna.version)" \
    -Djunit.version="$(property junit.version)"
