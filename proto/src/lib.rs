//! The ldpcov wire format: the `ldpcov.v1` protobuf messages generated from
//! `proto/ldpcov/v1/ldpcov.proto`, its file descriptor set for gRPC reflection, and,
//! behind the `grpc` feature, the tonic client and server stubs of its services and the
//! retry policy of the callers that retry them ([`retry`]: the device client and the
//! relay's forwarder, which must not depend on each other).
//!
//! Nothing here decides anything about privacy: what a spec means, how a payload is
//! checked and what noise it carries live in `ldpcov-privacy`. Crates that only read or
//! write messages (the estimators, the test vectors) build without tonic.
//!
//! ```
//! use ldpcov_proto::v1::{CollectionSpec, Encoding};
//! use prost::Message;
//!
//! let spec = CollectionSpec { collection_id: "demo".into(), dim: 20, ..Default::default() };
//! let bytes = spec.encode_to_vec();
//! assert_eq!(CollectionSpec::decode(bytes.as_slice())?, spec);
//! assert_eq!(Encoding::try_from(1)?, Encoding::I32Le);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// Generated code for the `ldpcov.v1` protobuf package: the messages always, the
/// gRPC client and server modules with the `grpc` feature.
#[allow(missing_docs, clippy::all, clippy::pedantic, unreachable_pub)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/ldpcov.v1.rs"));
}

#[cfg(feature = "grpc")]
pub mod retry;

/// The encoded `google.protobuf.FileDescriptorSet` of `ldpcov/v1/ldpcov.proto`
/// (written by the build script from the same compilation as [`v1`]): what a gRPC
/// server reflection service registers so that `grpcurl list` / `describe` work.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ldpcov_descriptor.bin"));
