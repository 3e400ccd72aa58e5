//! Feast's protobuf messages, generated at build time from the vendored
//! `.proto` files (`proto/feast`, Apache-2.0, Copyright The Feast Authors; see
//! `proto/README.md`).

#![allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic
)]

// The generated servers name these crates in paths only: tonic (the service
// traits and transport types) and tonic-prost (their protobuf codec).
use tonic as _;
use tonic_prost as _;

/// `feast.types`: `Value`, `ValueType`, `EntityKey`.
pub mod types {
    include!(concat!(env!("OUT_DIR"), "/feast.types.rs"));
}

/// `feast.core`: the registry and its objects.
pub mod core {
    include!(concat!(env!("OUT_DIR"), "/feast.core.rs"));
}

/// `feast.serving`: `GetOnlineFeaturesRequest` / `Response`, and the server of
/// `ServingService` (the removed Go server's gRPC API).
pub mod serving {
    include!(concat!(env!("OUT_DIR"), "/feast.serving.rs"));
}

/// `GrpcFeatureServer` (`feast listen`'s gRPC service; its `.proto` file has no
/// package): `Push`, `WriteToOnlineStore`, `GetOnlineFeatures`.
pub mod grpc_server {
    /// The packages its generated code names, from where it is included.
    pub mod feast {
        pub use super::super::{serving, types};
    }
    include!(concat!(env!("OUT_DIR"), "/_.rs"));
}
