//! Before a TLS handshake: what the client's first byte says, and the answer to
//! a client that speaks plain HTTP to a TLS port.

use std::sync::LazyLock;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// What the first byte a client sent to a TLS port says.
pub(super) enum FirstByte {
    /// A TLS record (a handshake starts with content type 22).
    Tls,
    /// A letter: an HTTP method, sent in plain text.
    PlainHttp,
    /// Nothing before the header-read deadline.
    TimedOut,
    /// The client closed, or the socket failed.
    Closed,
}

pub(super) async fn first_byte(stream: &TcpStream, due: Instant) -> FirstByte {
    let mut byte = [0u8; 1];
    match tokio::time::timeout_at(due, stream.peek(&mut byte)).await {
        Err(_) => FirstByte::TimedOut,
        Ok(Ok(1..)) if byte[0].is_ascii_uppercase() => FirstByte::PlainHttp,
        Ok(Ok(1..)) => FirstByte::Tls,
        Ok(_) => FirstByte::Closed,
    }
}

/// The answer to a plain-HTTP request on a TLS port.
static PLAIN_HTTP_ON_TLS: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = br#"{"error":{"code":"malformed_request","message":"this port speaks HTTPS (TLS): the request was sent as plain HTTP; send it to https://"}}"#;
    let mut out = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
});

/// Answers a plain-HTTP client of a TLS port 400 and closes, as a refused
/// connection is ([`super::refuse`]).
pub(super) async fn answer_plain_http(mut stream: TcpStream) {
    let _ = stream.try_write(&PLAIN_HTTP_ON_TLS);
    super::linger(&mut stream).await;
}
