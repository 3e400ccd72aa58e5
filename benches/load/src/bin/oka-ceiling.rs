//! The ceiling server: a bare axum handler that parses the seed request body and
//! answers a fixed, Oka-shaped JSON document. What the harness measures against it
//! is what this machine (HTTP stack, JSON parse, load generator) can do at all.
//!
//! Like `oka serve`'s per-core runtime, each worker is a thread running a
//! current-thread tokio runtime with its own `SO_REUSEPORT` listener.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::Parser;

/// The fixed answer, shaped like Oka's answer to the seed request.
const ANSWER: &str = r#"{"results":{"simple_feature":[[{"id":"test-id-1","timestamp":"2026-12-02T11:16:20.321078+00:00","value":2.0}]]},"statuses":{"simple_feature":["present"]},"server_id":"ceiling/0"}"#;

#[derive(Debug, Parser)]
#[command(about = "Ceiling server for the Oka load harness")]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:1199")]
    listen: SocketAddr,
    /// Worker threads (one current-thread runtime and SO_REUSEPORT listener each).
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

async fn features(body: Bytes) -> Response {
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(v) if v.get("target_features").is_some() && v.get("keys").is_some() => {
            ([(header::CONTENT_TYPE, "application/json")], ANSWER).into_response()
        }
        _ => (StatusCode::BAD_REQUEST, "bad request").into_response(),
    }
}

fn listener(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

fn worker(std_listener: std::net::TcpListener) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let app = Router::new().route("/v1/features", post(features));
        axum::serve(listener, app).await?;
        Ok(())
    })
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let workers = args.workers.max(1);
    // Bind every listener before starting, so readiness means all are bound.
    let listeners = (0..workers)
        .map(|_| listener(args.listen))
        .collect::<anyhow::Result<Vec<_>>>()
        .with_context(|| format!("binding {}", args.listen))?;
    eprintln!(
        "oka-ceiling listening on {} with {workers} worker(s)",
        args.listen
    );
    let handles: Vec<_> = listeners
        .into_iter()
        .map(|l| std::thread::spawn(move || worker(l)))
        .collect();
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => anyhow::bail!("worker thread panicked"),
        }
    }
    Ok(())
}
