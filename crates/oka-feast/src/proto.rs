//! Feast's protobuf messages, generated at build time from the vendored
//! `.proto` files (`proto/feast`, Apache-2.0, Copyright The Feast Authors; see
//! `proto/README.md`).

#![allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic
)]

/// `feast.types`: `Value`, `ValueType`, `EntityKey`.
pub mod types {
    include!(concat!(env!("OUT_DIR"), "/feast.types.rs"));
}

/// `feast.core`: the registry and its objects.
pub mod core {
    include!(concat!(env!("OUT_DIR"), "/feast.core.rs"));
}

/// `feast.serving`: `GetOnlineFeaturesRequest` / `Response`.
pub mod serving {
    include!(concat!(env!("OUT_DIR"), "/feast.serving.rs"));
}
