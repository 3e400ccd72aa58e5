//! `POST /ui/api/try`: the try-it form's request, sent to the serving port's
//! `POST /v1/features` over a real connection, with the caller's own key (header
//! `X-Oka-Try-Key`, sent on as `Authorization: Bearer`). The answer comes back
//! whole — status, `Server-Timing`, body — for the page to show. Only that route
//! is reachable this way: nothing that writes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Request, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use oka_core::ErrorCode;
use serde::Serialize;

use crate::error::ApiError;
use crate::state::AppState;

/// The whole exchange with the serving port: connect, send, read the answer.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer the page is sent (a request for many keys can be bigger:
/// it is refused with a message saying so).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// What the serving port answered.
#[derive(Debug, Serialize)]
struct Tried {
    /// The URL the request went to.
    url: String,
    status: u16,
    server_timing: Option<String>,
    content_type: Option<String>,
    /// The answer's body as text.
    body: String,
}

/// `POST /ui/api/try`.
pub(super) async fn try_it(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match forward(&state, &headers, body).await {
        Ok(tried) => super::json(&tried),
        Err(e) => e.into_response(),
    }
}

/// Where the serving port is reachable from this process: its bound address, or
/// the loopback address when it listens on every interface.
fn serving_target(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

async fn forward(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Tried, ApiError> {
    let shared = &state.shared;
    let limits = &shared.limits;
    let addr = shared
        .serving_addr
        .get()
        .copied()
        .map(serving_target)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::ServingUnavailable,
                "the serving port is not listening yet; retry shortly",
            )
        })?;
    let key = match headers.get("x-oka-try-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .filter(|k| !k.trim().is_empty())
                .and_then(|k| HeaderValue::from_str(&format!("Bearer {}", k.trim())).ok())
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::InvalidRequest,
                        "the key (X-Oka-Try-Key) must be printable ASCII",
                    )
                })?,
        ),
    };
    let limit = limits.max_body_bytes;
    let read = tokio::time::timeout(
        limits.body_read_timeout,
        Limited::new(body, limit).collect(),
    );
    let body = match read.await {
        Err(_) => {
            return Err(ApiError::new(
                ErrorCode::BodyTimeout,
                "the request body did not arrive in time",
            ));
        }
        Ok(Err(_)) => {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the request exceeds {limit} bytes (the server's --max-body-bytes)"),
            ));
        }
        Ok(Ok(b)) => b.to_bytes(),
    };
    let url = format!("http://{addr}/v1/features");
    let exchange = send(addr, key, body);
    let (status, h, answer) =
        tokio::time::timeout(TRY_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                ApiError::new(
                    ErrorCode::DeadlineExceeded,
                    format!(
                        "the serving port ({url}) did not answer within {} s",
                        TRY_TIMEOUT.as_secs()
                    ),
                )
            })??;
    let text =
        |name: header::HeaderName| h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Ok(Tried {
        server_timing: text(header::HeaderName::from_static("server-timing")),
        content_type: text(header::CONTENT_TYPE),
        url,
        status,
        body: String::from_utf8_lossy(&answer).into_owned(),
    })
}

/// One HTTP/1.1 exchange with the serving port.
async fn send(
    addr: SocketAddr,
    key: Option<HeaderValue>,
    body: Bytes,
) -> Result<(u16, HeaderMap, Bytes), ApiError> {
    let unreachable = |what: &str| {
        ApiError::new(
            ErrorCode::ServingUnavailable,
            format!("could not {what} the serving port at {addr}; is the server shutting down?"),
        )
    };
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|_| unreachable("connect to"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|_| unreachable("talk to"))?;
    let connection = tokio::spawn(conn);
    let mut request = Request::post("/v1/features")
        .header(header::HOST, addr.to_string())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .map_err(|_| ApiError::new(ErrorCode::Internal, "internal error"))?;
    if let Some(key) = key {
        request.headers_mut().insert(header::AUTHORIZATION, key);
    }
    let response = sender
        .send_request(request)
        .await
        .map_err(|_| unreachable("read an answer from"))?;
    let (parts, body) = response.into_parts();
    let answer = Limited::new(body, MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the answer exceeds {} MiB, more than the console shows; ask for fewer keys",
                    MAX_ANSWER_BYTES >> 20
                ),
            )
        })?
        .to_bytes();
    connection.abort();
    Ok((parts.status.as_u16(), parts.headers, answer))
}
