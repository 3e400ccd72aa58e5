//! `POST /v1/ingest`.

use oka_core::{ErrorCode, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::error::ApiError;
use crate::state::Shared;

/// How many rejected records a response details.
const MAX_REPORTED: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IngestRequest {
    feature: String,
    records: Vec<Map<String, Json>>,
}

/// One rejected record.
#[derive(Debug, Serialize)]
pub struct Rejection {
    /// Its position in `records`.
    pub index: usize,
    /// Why.
    pub message: String,
}

/// The ingest response.
#[derive(Debug, Serialize)]
pub struct IngestSummary {
    /// Records written.
    pub written: usize,
    /// Records rejected (not written).
    pub rejected: usize,
    /// The first rejections.
    pub errors: Vec<Rejection>,
}

/// `POST /v1/ingest`: `{"feature": …, "records": [{…}, …]}`. Valid records are
/// written in one batch; invalid ones are reported, not written.
pub async fn ingest(shared: &Shared, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let req: IngestRequest = serde_json::from_slice(body).map_err(|e| {
        let msg = e.to_string();
        let code = if msg.starts_with("unknown field") {
            ErrorCode::UnknownField
        } else {
            ErrorCode::MalformedRequest
        };
        ApiError::new(code, format!("invalid ingest body: {msg}"))
    })?;
    let loaded = shared.loaded.load_full();
    let registry = &loaded.registry;
    let id = registry.feature_id(&req.feature).ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownFeature,
            format!("unknown feature `{}`", req.feature),
        )
    })?;
    let feature = registry.feature(id);
    if !feature.is_pipeline() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!(
                "`{}` is an on-demand feature; only pipeline features are ingested",
                feature.name
            ),
        ));
    }
    let now = Timestamp::now();
    let mut rows = Vec::with_capacity(req.records.len());
    let mut errors = Vec::new();
    let mut rejected = 0;
    for (index, record) in req.records.iter().enumerate() {
        match feature.entity.row_from_json(record, now) {
            Ok(r) => rows.push(r),
            Err(message) => {
                rejected += 1;
                if errors.len() < MAX_REPORTED {
                    errors.push(Rejection { index, message });
                }
            }
        }
    }
    oka_ingest::IngestMetrics::rows_rejected(&*shared.metrics, rejected as u64);
    let written = rows.len();
    shared.writer.write(registry, id, rows).await?;
    let summary = IngestSummary {
        written,
        rejected,
        errors,
    };
    serde_json::to_vec(&summary).map_err(|_| ApiError::new(ErrorCode::Internal, "internal error"))
}
