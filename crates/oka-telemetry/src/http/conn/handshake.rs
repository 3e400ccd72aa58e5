//! Before a TLS handshake: what the client's first byte says, and the answer to
//! a client that speaks plain HTTP to a TLS port.

use std::io;
use std::pin::pin;
use std::sync::{Arc, LazyLock};

use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::{Clocked, ConnEvents, ConnTimeout, ConnTimeouts, Phase, TlsFailure};
use crate::http::refuse::linger;

/// The TLS handshake of a new connection to a TLS port, under the first
/// request head's deadline (`due`); `None` when the connection ended before it
/// completed (a plain-HTTP client answered 400, a timeout, a failed handshake,
/// the server stopping).
pub(super) async fn handshake(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    phase: Arc<Phase>,
    timeouts: ConnTimeouts,
    due: Instant,
    events: Arc<dyn ConnEvents>,
    stop: &watch::Receiver<bool>,
) -> Option<tokio_rustls::server::TlsStream<Clocked>> {
    let mut stop = pin!(crate::http::stopped(stop.clone()));
    // A client speaking plain HTTP to a TLS port gets an answer it can read.
    let first = tokio::select! {
        first = first_byte(&stream, due) => first,
        () = &mut stop => return None,
    };
    match first {
        FirstByte::Tls => {}
        FirstByte::PlainHttp => {
            events.tls_failed(TlsFailure::PlainHttp);
            answer_plain_http(stream).await;
            return None;
        }
        FirstByte::TimedOut => {
            events.connection_timed_out(ConnTimeout::HeaderRead);
            return None;
        }
        FirstByte::Closed => return None,
    }
    let io = Clocked::new(stream, phase, timeouts, due, Arc::clone(&events));
    // The handshake's reads run under the first head's deadline (`due`).
    let handshake = tokio::select! {
        handshake = tokio_rustls::TlsAcceptor::from(config).accept(io).into_fallible() => handshake,
        () = &mut stop => return None,
    };
    match handshake {
        Ok(stream) => Some(stream),
        Err((e, mut io)) => {
            // A timeout was counted by the socket's clock.
            if e.kind() != io::ErrorKind::TimedOut {
                events.tls_failed(TlsFailure::Handshake);
                debug!(error = %e, "TLS handshake failed");
                // The alert saying why is written; closing with the client's
                // data unread would reset the connection before it is read.
                linger(&mut io.inner).await;
            }
            None
        }
    }
}

/// What the first byte a client sent to a TLS port says.
enum FirstByte {
    /// A TLS record (a handshake starts with content type 22).
    Tls,
    /// A letter: an HTTP method, sent in plain text.
    PlainHttp,
    /// Nothing before the header-read deadline.
    TimedOut,
    /// The client closed, or the socket failed.
    Closed,
}

async fn first_byte(stream: &TcpStream, due: Instant) -> FirstByte {
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
async fn answer_plain_http(mut stream: TcpStream) {
    let _ = stream.try_write(&PLAIN_HTTP_ON_TLS);
    linger(&mut stream).await;
}
