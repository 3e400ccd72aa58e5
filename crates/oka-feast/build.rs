//! Compiles Feast's vendored `.proto` files (proto/feast, Apache-2.0, see
//! proto/README.md) with protox, so no `protoc` is needed to build Oka.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "feast/core/Registry.proto",
        "feast/types/EntityKey.proto",
        "feast/types/Value.proto",
        "feast/serving/ServingService.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
