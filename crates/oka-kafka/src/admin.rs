//! The consumer process's admin port: `/metrics` (OpenMetrics), `/healthz`
//! (the process is up) and `/readyz` (every consumer has joined its group).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::context::Context;
use crate::metrics::{KafkaMetrics, OPENMETRICS};

/// What the admin routes read.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// The process's metrics.
    pub metrics: Arc<KafkaMetrics>,
    /// Each consumer's shared state.
    pub consumers: Vec<Arc<Context>>,
}

/// The admin routes.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(state)
}

/// Serves the admin routes on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AdminState) -> std::io::Result<()> {
    axum::serve(listener, router(state)).await
}

async fn metrics(State(s): State<AdminState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, OPENMETRICS)], s.metrics.render())
}

async fn ready(State(s): State<AdminState>) -> impl IntoResponse {
    let waiting = s.consumers.iter().filter(|c| !c.joined()).count();
    if waiting == 0 {
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

    use super::*;
    use crate::lag::Partitions;

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
        let app = router(AdminState {
            metrics,
            consumers: vec![Arc::clone(&ctx)],
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
        let (status, body) = get(app, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("1 of 1"), "{body}");
    }
}
