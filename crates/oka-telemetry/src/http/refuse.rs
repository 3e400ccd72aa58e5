//! The answer to a connection refused at the connection cap or the descriptor
//! limit: a 503 written without reading its request, then a close.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The answer to a connection refused at the connection cap or the descriptor
/// limit, written without parsing its request.
static REFUSAL: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = br#"{"error":{"code":"overloaded","message":"this server has too many open connections; retry shortly, on a new connection"}}"#;
    let mut out = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
});

/// How long a refused connection is given to read its answer.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Answers a refused connection with 503 and closes it. The answer goes out first,
/// then a half-close; what the client had sent is read and dropped for up to
/// `REFUSAL_LINGER`, so that closing does not reset the connection before the
/// client reads the answer.
pub async fn refuse(mut stream: TcpStream) {
    refuse_now(&stream);
    linger(&mut stream).await;
}

/// Half-closes `stream` after an answer written to it, and reads and drops
/// what the client sent for up to `REFUSAL_LINGER`, so that closing does not
/// reset the connection before the client reads the answer.
pub(super) async fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        let mut sink = [0u8; 4096];
        let mut total = 0;
        while total < 64 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}

/// Writes the 503 without waiting (a refusal that cannot linger).
pub fn refuse_now(stream: &TcpStream) {
    let _ = stream.try_write(&REFUSAL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_well_formed_response() {
        let text = String::from_utf8(REFUSAL.clone()).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(json["error"]["code"], "overloaded");
    }
}
