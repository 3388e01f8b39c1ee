//! Compiles `proto/ldpcov/v1/ldpcov.proto` with protox (pure Rust: no `protoc` needed),
//! and writes its encoded file descriptor set to `OUT_DIR/ldpcov_descriptor.bin` for
//! gRPC server reflection (`ldpcov_proto::FILE_DESCRIPTOR_SET`). The gRPC service stubs
//! are generated only with the `grpc` feature.

use protox::prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/ldpcov/v1/ldpcov.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("ldpcov_descriptor.bin"), fds.encode_to_vec())?;
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        .compile_fds(fds)?;
    Ok(())
}
