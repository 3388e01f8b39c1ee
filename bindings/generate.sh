#!/usr/bin/env bash
# Generates the Kotlin, Swift and Python sources of ldpcov-ffi from the compiled
# library (uniffi "library mode": the interface is read from the library itself).
#
#   bindings/generate.sh                     # all three into bindings/generated/{python,kotlin,swift}
#   bindings/generate.sh python              # only some languages
#   bindings/generate.sh --out DIR python    # into DIR/python
#   bindings/generate.sh --release kotlin    # from a release build (what apps ship)
#
# It builds the library first (`cargo build -p ldpcov-ffi`) unless LDPCOV_FFI_LIB names
# an already-built one; UNIFFI_BINDGEN may name the bindgen binary likewise. The Python
# directory also gets a copy of the library, so it is importable as it stands
# (`PYTHONPATH=bindings/generated/python python3 -c 'import ldpcov_ffi'`). Kotlin and
# Swift apps link the library built for their own targets (cargo-ndk, an XCFramework).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bindings/generated"
profile=debug
languages=()
while (($#)); do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --release) profile=release; shift ;;
        python | kotlin | swift) languages+=("$1"); shift ;;
        *) echo "usage: $0 [--out DIR] [--release] [python|kotlin|swift]..." >&2; exit 2 ;;
    esac
done
((${#languages[@]})) || languages=(python kotlin swift)

case "$(uname -s)" in
    Darwin) libname=libldpcov_ffi.dylib ;;
    *) libname=libldpcov_ffi.so ;;
esac

if [[ -z "${LDPCOV_FFI_LIB:-}" ]]; then
    flags=(-p ldpcov-ffi --manifest-path "$root/Cargo.toml")
    [[ $profile == release ]] && flags+=(--release)
    cargo build "${flags[@]}"
    target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$root/Cargo.toml" |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    LDPCOV_FFI_LIB="$target/$profile/$libname"
    UNIFFI_BINDGEN=${UNIFFI_BINDGEN:-$target/$profile/uniffi-bindgen}
fi
UNIFFI_BINDGEN=${UNIFFI_BINDGEN:-$(dirname "$LDPCOV_FFI_LIB")/uniffi-bindgen}

for language in "${languages[@]}"; do
    mkdir -p "$out/$language"
    "$UNIFFI_BINDGEN" generate "$LDPCOV_FFI_LIB" --language "$language" \
        --out-dir "$out/$language"
done
if [[ " ${languages[*]} " == *" python "* ]]; then
    cp "$LDPCOV_FFI_LIB" "$out/python/"
fi
echo "generated ${languages[*]} bindings in $out"
