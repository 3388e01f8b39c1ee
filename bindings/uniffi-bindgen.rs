//! `uniffi-bindgen`: generates the Kotlin, Swift and Python sources of `ldpcov-ffi`
//! from the compiled library (`bindings/generate.sh` runs it).

fn main() {
    uniffi::uniffi_bindgen_main()
}
