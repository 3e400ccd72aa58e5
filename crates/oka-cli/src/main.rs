//! The `oka` binary with no native UDFs of its own; see `examples/custom-udf` for a
//! binary that registers some.

fn main() -> std::process::ExitCode {
    oka_cli::main_with(oka_core::NativeUdfs::new())
}
