//! Compiles Feast's vendored `.proto` files (proto/feast, Apache-2.0, see
//! proto/README.md) with protox, so no `protoc` is needed to build Oka: the
//! messages with prost, and the servers of `ServingService` and
//! `GrpcFeatureServer` with tonic (no clients).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "feast/core/Registry.proto",
        "feast/types/EntityKey.proto",
        "feast/types/Value.proto",
        "feast/serving/ServingService.proto",
        "feast/serving/GrpcServer.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
