//! What a person reads about a failure: the cause in words, without an OS error
//! number, a Rust type or a Debug dump.

/// An I/O error in words for a person: what happened, without the OS error
/// number or a Debug dump.
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let text = match (e.raw_os_error(), e.kind()) {
        (Some(24), _) => "too many open files (the process's descriptor limit)",
        (Some(23), _) => "too many open files in the system",
        (_, K::NotFound) => "no such file or directory",
        (_, K::PermissionDenied) => "permission denied",
        (_, K::AlreadyExists) => "it already exists",
        (_, K::AddrInUse) => "the address is already in use",
        (_, K::AddrNotAvailable) => "the address is not available on this host",
        (_, K::ConnectionRefused) => "connection refused",
        (_, K::ConnectionReset) => "connection reset by the peer",
        (_, K::TimedOut) => "timed out",
        (_, K::InvalidData) => "the data is not valid (for text: not UTF-8)",
        (_, K::IsADirectory) => "it is a directory",
        (_, K::OutOfMemory) => "out of memory",
        _ => "",
    };
    if !text.is_empty() {
        return text.to_owned();
    }
    // Other errors: the message without the trailing " (os error N)".
    let message = e.to_string();
    match message.rfind(" (os error ") {
        Some(i) => message[..i].to_lowercase(),
        None => message,
    }
}
