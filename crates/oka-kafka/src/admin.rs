//! The consumer process's admin port: `/metrics` (OpenMetrics), `/healthz`
//! (the process is up) and `/readyz` (every consumer has joined its group and the
//! store answers; else why not).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use oka_telemetry::http::{ConnTimeouts, Listener, Served};
use tokio::sync::watch;

use crate::context::Context;
use crate::metrics::{KafkaMetrics, OPENMETRICS};

/// What the admin routes read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// The process's metrics.
    pub metrics: Arc<KafkaMetrics>,
    /// Each consumer's shared state.
    pub consumers: Vec<Arc<Context>>,
    /// The store's state (an outage makes the process unready, with its cause).
    pub store_watch: Arc<oka_storage::StoreWatch>,
    /// The store, asked for its health while an outage lasts (so that readiness
    /// comes back without waiting for the next batch).
    pub store: Arc<dyn oka_storage::FeatureStore>,
}

/// The admin routes.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(state)
}

/// Connections the admin port holds at once; beyond, a new one is answered 503
/// and closed.
pub const MAX_CONNECTIONS: usize = 64;

/// Serves the admin routes on `listener` until `stop`, with the limits of every
/// Oka port (`oka_telemetry::http::Listener`): at most [`MAX_CONNECTIONS`]
/// connections, a request head within `timeouts.header_read`, keep-alive
/// connections closed after `timeouts.idle`; so a client that connects and sends
/// nothing cannot hold the port.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    timeouts: ConnTimeouts,
    stop: watch::Receiver<bool>,
) -> Served {
    serve_bounded(listener, state, MAX_CONNECTIONS, timeouts, stop).await
}

async fn serve_bounded(
    listener: tokio::net::TcpListener,
    state: AdminState,
    max_connections: usize,
    timeouts: ConnTimeouts,
    stop: watch::Receiver<bool>,
) -> Served {
    let events = Arc::clone(&state.metrics);
    Listener {
        name: "oka-kafka-admin".to_owned(),
        app: router(state).into(),
        // Probes and scrapers keep their connections until the process ends.
        draining: Arc::new(oka_telemetry::http::Drain::new()),
        open: Arc::new(AtomicUsize::new(0)),
        events,
        timeouts,
        max_connections,
        // The Kafka source's admin port serves plain HTTP (probes, scrapes).
        tls: None,
    }
    .run(listener, stop)
    .await
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, OPENMETRICS)], s.metrics.render())
}

async fn ready(State(s): State<AdminState>) -> impl IntoResponse {
    let waiting = s.consumers.iter().filter(|c| !c.joined()).count();
    if s.store_watch.outage().is_some() {
        let _ = s.store_watch.observe(s.store.health().await);
    }
    if let Some(outage) = s.store_watch.outage() {
        // Batches wait (fetching paused) until the store answers again.
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", outage.reason()),
        )
    } else if waiting == 0 {
        (StatusCode::OK, "ready\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{waiting} of {} consumers have not joined their group yet\n",
                s.consumers.len()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use std::time::Duration;

    use super::*;
    use crate::lag::Partitions;

    /// A store whose health check fails, as Redis's does while it is down.
    #[derive(Debug)]
    struct Down;

    #[async_trait::async_trait]
    impl oka_storage::FeatureStore for Down {
        fn backend(&self) -> &'static str {
            "redis"
        }
        async fn read(
            &self,
            _: &oka_core::Feature,
            _: &[oka_core::EntityKey],
            _: &oka_core::Query,
        ) -> Result<oka_core::KeyedRows, oka_storage::StoreError> {
            Err(self.error())
        }
        async fn write(
            &self,
            _: &oka_core::Feature,
            _: &[(oka_core::EntityKey, oka_core::Row)],
        ) -> Result<(), oka_storage::StoreError> {
            Err(self.error())
        }
        async fn health(&self) -> Result<(), oka_storage::StoreError> {
            Err(self.error())
        }
    }

    impl Down {
        fn error(&self) -> oka_storage::StoreError {
            oka_storage::StoreError::new(
                oka_storage::StoreErrorKind::Unavailable,
                "nothing listens at h:1 (the connection was refused)",
            )
        }
    }

    async fn get(app: Router, path: &str) -> (StatusCode, String) {
        let r = app
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = r.status();
        let body = r.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn metrics_and_probes() {
        let partitions = Arc::new(Partitions::default());
        let metrics = Arc::new(KafkaMetrics::new("memory", Arc::clone(&partitions)));
        let fm = metrics.feature("clicks");
        fm.rejected(crate::message::Reason::NotJson);
        fm.batch_written(10, 9, std::time::Duration::from_millis(3));
        let (f, t) = ("clicks".into(), "clicks-topic".into());
        partitions.assign(&f, &t, &[2]);
        partitions.watermark(&f, 2, 50, 20);
        let ctx = Arc::new(Context::new(f, t, fm, partitions));
        let store_watch = Arc::new(
            oka_storage::StoreWatch::new("redis://h:1", "redis").confirm_after(Duration::ZERO),
        );
        let app = router(AdminState {
            metrics,
            consumers: vec![Arc::clone(&ctx)],
            store_watch: Arc::clone(&store_watch),
            store: Arc::new(Down),
        });
        let (status, body) = get(app.clone(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        for want in [
            r#"oka_kafka_records_rejected_total{feature="clicks",reason="not_json"} 1"#,
            r#"oka_kafka_records_written_total{feature="clicks"} 9"#,
            r#"oka_kafka_batch_records_count{feature="clicks"} 1"#,
            r#"oka_kafka_consumer_lag_records{feature="clicks",topic="clicks-topic",partition="2"} 30"#,
            r#"oka_kafka_consumer_lag_seconds{feature="clicks",topic="clicks-topic",partition="2"} 0"#,
        ] {
            assert!(body.contains(want), "{want} in\n{body}");
        }
        assert_eq!(get(app.clone(), "/healthz").await.0, StatusCode::OK);
        let (status, body) = get(app.clone(), "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("1 of 1"), "{body}");
        // A store outage is the reason, in words.
        store_watch.failed(&oka_storage::StoreError::new(
            oka_storage::StoreErrorKind::Unavailable,
            "nothing listens at h:1 (the connection was refused)",
        ));
        let (status, body) = get(app, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body.starts_with("the store is unavailable (nothing listens at h:1"),
            "{body}"
        );
    }

    /// Reads until the server closes the connection (or `within` passes).
    async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
        use tokio::io::AsyncReadExt as _;
        let mut buf = [0u8; 512];
        let read = async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(within, read).await.is_ok()
    }

    #[tokio::test]
    async fn idle_connections_are_capped_and_closed() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        use tokio::net::{TcpListener, TcpStream};
        let partitions = Arc::new(Partitions::default());
        let metrics = Arc::new(KafkaMetrics::new("memory", Arc::clone(&partitions)));
        let state = AdminState {
            metrics: Arc::clone(&metrics),
            consumers: Vec::new(),
            store_watch: Arc::new(oka_storage::StoreWatch::new("memory://", "memory")),
            store: Arc::new(oka_storage::MemoryStore::new()),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limit = Duration::from_millis(300);
        let timeouts = ConnTimeouts {
            header_read: limit,
            idle: limit,
        };
        let (_stop, stop) = watch::channel(false);
        tokio::spawn(serve_bounded(listener, state, 2, timeouts, stop));
        // Two clients connect and send nothing: they hold both slots.
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A third is answered 503 and closed at once.
        let mut c = TcpStream::connect(addr).await.unwrap();
        let mut refusal = String::new();
        tokio::time::timeout(Duration::from_millis(200), c.read_to_string(&mut refusal))
            .await
            .unwrap()
            .unwrap();
        assert!(refusal.starts_with("HTTP/1.1 503"), "{refusal}");
        // The idle two are closed once their time is up, freeing the slots.
        assert!(closed_within(&mut a, limit * 3).await);
        assert!(closed_within(&mut b, limit * 3).await);
        let mut d = TcpStream::connect(addr).await.unwrap();
        d.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        d.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // Counted under the families `oka serve` reports its ports' with.
        let text = metrics.render();
        for want in [
            r#"oka_http_refused_total{reason="connection_cap"} 1"#,
            r#"oka_http_connection_timeouts_total{phase="header_read"} 2"#,
            "oka_http_connections_accepted_total 4",
        ] {
            assert!(text.contains(want), "{want} in\n{text}");
        }
    }
}
