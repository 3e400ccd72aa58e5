//! `POST /v1/ingest`: the body's valid records are written through the write
//! path a batch at a time ([`oka_ingest::body`]); the answer counts and details
//! the rejected ones.

use oka_core::{ErrorCode, Timestamp};
use oka_ingest::IngestMetrics;
use oka_ingest::body::{self, BodyError};

use crate::error::ApiError;
use crate::state::Shared;

/// Ingests one body; returns the JSON answer.
pub async fn ingest(shared: &Shared, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let registry = std::sync::Arc::clone(&shared.loaded.load().registry);
    let bounds = oka_ingest::TimeBounds {
        max_future_skew: shared.limits.max_future_skew,
    };
    let writer = &shared.writer;
    let result = body::ingest(
        body,
        &registry,
        writer,
        Timestamp::now(),
        &bounds,
        writer.batch_size(),
    )
    .await;
    let summary = result.map_err(|e| match e {
        BodyError::Malformed(_) => ApiError::new(ErrorCode::MalformedRequest, e.to_string()),
        BodyError::UnknownField(_) => ApiError::new(ErrorCode::UnknownField, e.to_string()),
        BodyError::UnknownFeature(_) => ApiError::new(ErrorCode::UnknownFeature, e.to_string()),
        BodyError::NotPipeline(_) => ApiError::new(ErrorCode::InvalidRequest, e.to_string()),
        BodyError::Store { error, written } => crate::api::write_failed(shared, &error, written),
        _ => ApiError::new(ErrorCode::Internal, "internal error"),
    })?;
    shared.metrics.rows_rejected(summary.rejected as u64);
    serde_json::to_vec(&summary).map_err(|_| ApiError::new(ErrorCode::Internal, "internal error"))
}
