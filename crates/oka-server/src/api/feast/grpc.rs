//! Feast's gRPC API (`oka serve --feast-repo DIR --grpc-listen ADDR`):
//! `feast.serving.ServingService` (`GetOnlineFeatures`, `GetFeastServingInfo`:
//! what the removed Go feature server served) and `GrpcFeatureServer`
//! (`GetOnlineFeatures`, `Push`, `WriteToOnlineStore`: what `feast listen`
//! serves). A request is taken into the same plan as Feast's HTTP route
//! ([`super::plan`]), read and computed by the same code as every request
//! ([`crate::serve::compute`]), inside the same guard ([`crate::guard::grpc`]:
//! API keys from the call's metadata, admission, deadlines from `grpc-timeout`,
//! the in-flight gauge, metrics, live statistics, the trace); its answer is
//! Feast's `GetOnlineFeaturesResponse`.

use std::collections::HashMap;
use std::time::Instant;

use base64::Engine as _;
use oka_core::execute::Outcome;
use oka_core::{ErrorCode, Value};
use oka_feast::layout;
use oka_feast::proto::grpc_server::grpc_feature_server_server::GrpcFeatureServer;
use oka_feast::proto::grpc_server::{
    PushRequest, PushResponse, WriteToOnlineStoreRequest, WriteToOnlineStoreResponse,
};
use oka_feast::proto::serving::get_online_features_request::Kind;
use oka_feast::proto::serving::get_online_features_response::FeatureVector;
use oka_feast::proto::serving::serving_service_server::ServingService;
use oka_feast::proto::serving::{
    FeatureList, FieldStatus, GetFeastServingInfoRequest, GetFeastServingInfoResponse,
    GetOnlineFeaturesRequest, GetOnlineFeaturesResponse, GetOnlineFeaturesResponseMetadata,
};
use oka_feast::proto::types::{RepeatedValue, Value as ProtoValue, value::Val};
use serde_json::Value as Json;
use tonic::{Request, Response, Status};

use super::compute::{compute_groups, key_count, registry};
use super::{Computed, Out, Plan};
use crate::auth::{Caller, Scope};
use crate::error::ApiError;
use crate::guard;
use crate::metrics::Route;
use crate::serve::{self, Timing};
use crate::spans;
use crate::state::AppState;

/// Both of Feast's gRPC services, on one worker's state.
#[derive(Clone)]
pub struct FeastGrpc {
    state: AppState,
}

impl std::fmt::Debug for FeastGrpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeastGrpc").finish_non_exhaustive()
    }
}

impl FeastGrpc {
    /// The services on `state` (a worker's).
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    async fn online(
        &self,
        request: Request<GetOnlineFeaturesRequest>,
        method: &'static str,
    ) -> Result<Response<GetOnlineFeaturesResponse>, Status> {
        let (metadata, extensions, request) = request.into_parts();
        let caller = Caller::of(&extensions);
        let method = (Route::FeastGrpc, method);
        guard::grpc(
            &self.state,
            method,
            (&metadata, &caller),
            Scope::Read,
            async |call| get_online_features(&self.state, request, call).await,
        )
        .await
    }
}

async fn get_online_features(
    state: &AppState,
    request: GetOnlineFeaturesRequest,
    call: serve::Call<'_>,
) -> Result<GetOnlineFeaturesResponse, ApiError> {
    let feast = registry(state)?;
    let loaded = state.shared.loaded.load_full();
    let (requests, plan) = super::plan(&feast, &loaded.registry, &feast_request(request)?)?;
    let mut timing = Timing::default();
    let groups = compute_groups(state, &loaded, &requests, call, &mut timing).await?;
    let answer = response(&groups, &plan)?;
    let done = Instant::now();
    // The answer's encoding: from the end of the UDFs (the first group's).
    let udfs_done = call.started + timing.parse + timing.storage + timing.udf;
    timing.encode = done.saturating_duration_since(udfs_done);
    spans::phases(call.trace, timing.phases());
    serve::computed(&state.shared, call, done, key_count(&groups));
    Ok(answer)
}

/// The gRPC request as the one Feast's HTTP route takes: the entity columns and
/// the request context (request data of on-demand views) both in `entities`,
/// sorted by name (a protobuf map has no order).
fn feast_request(request: GetOnlineFeaturesRequest) -> Result<super::Request<'static>, ApiError> {
    let mut columns: Vec<(String, RepeatedValue)> = request
        .entities
        .into_iter()
        .chain(request.request_context)
        .collect();
    columns.sort_by(|a, b| a.0.cmp(&b.0));
    let mut entities = super::Columns::with_capacity_and_hasher(columns.len(), Default::default());
    for (name, values) in columns {
        let values = values.val.iter().map(json_of).collect();
        entities.insert(oka_core::json::Text::from(name), values);
    }
    let (feature_service, features) = match request.kind {
        Some(Kind::FeatureService(s)) => (Some(s), Vec::new()),
        Some(Kind::Features(FeatureList { val })) => (None, val),
        None => (None, Vec::new()),
    };
    Ok(super::Request {
        entities,
        feature_service,
        features: super::Features::List(features),
        full_feature_names: request.full_feature_names,
        include_feature_view_version_metadata: request.include_feature_view_version_metadata,
    })
}

/// A `ValueProto` as the JSON value Feast's HTTP route takes for it.
fn json_of(v: &ProtoValue) -> Json {
    let list = |items: Vec<Json>| Json::Array(items);
    match &v.val {
        None | Some(Val::NullVal(_)) => Json::Null,
        Some(Val::Int32Val(n)) => Json::from(*n),
        Some(Val::Int64Val(n)) | Some(Val::UnixTimestampVal(n)) => Json::from(*n),
        Some(Val::DoubleVal(x)) => Json::from(*x),
        Some(Val::FloatVal(x)) => Json::from(f64::from(*x)),
        Some(Val::BoolVal(b)) => Json::from(*b),
        Some(Val::StringVal(s)) => Json::from(s.as_str()),
        Some(Val::BytesVal(b)) => Json::from(base64::engine::general_purpose::STANDARD.encode(b)),
        Some(Val::Int32ListVal(l)) => list(l.val.iter().map(|n| Json::from(*n)).collect()),
        Some(Val::Int64ListVal(l)) | Some(Val::UnixTimestampListVal(l)) => {
            list(l.val.iter().map(|n| Json::from(*n)).collect())
        }
        Some(Val::DoubleListVal(l)) => list(l.val.iter().map(|x| Json::from(*x)).collect()),
        Some(Val::FloatListVal(l)) => {
            list(l.val.iter().map(|x| Json::from(f64::from(*x))).collect())
        }
        Some(Val::BoolListVal(l)) => list(l.val.iter().map(|b| Json::from(*b)).collect()),
        Some(Val::StringListVal(l)) => list(l.val.iter().map(|s| Json::from(s.as_str())).collect()),
        // Types Oka does not serve: given to the plan as a value no key or
        // request field takes, so it is refused there with the column's name.
        Some(_) => Json::Object(serde_json::Map::new()),
    }
}

/// The answer as Feast's `GetOnlineFeaturesResponse`: the entity columns, then
/// the features, as the HTTP route answers them.
fn response(computed: &Computed, plan: &Plan) -> Result<GetOnlineFeaturesResponse, ApiError> {
    let encode_failed = |e: layout::LayoutError| {
        tracing::warn!(error = %e, "a value could not be written as Feast's");
        ApiError::new(ErrorCode::Internal, "internal error")
    };
    let epoch = prost_types::Timestamp::default();
    let views = plan.checked_outcomes(computed)?;
    let mut results = Vec::with_capacity(plan.width());
    for column in plan.columns() {
        let vector = match column {
            Out::Entity(values, ty) => FeatureVector {
                values: values
                    .iter()
                    .map(|v| layout::from_oka(v, ty))
                    .collect::<Result<_, _>>()
                    .map_err(encode_failed)?,
                statuses: vec![FieldStatus::Present as i32; values.len()],
                event_timestamps: vec![epoch; values.len()],
            },
            Out::Feature(feature) => {
                let (at, ty) = (feature.column, feature.ty);
                let mut vector = FeatureVector::default();
                for outcome in views.get(feature.target).map_or(&[][..], Vec::as_slice) {
                    let row = match outcome {
                        Some(Outcome::Present(rows)) => rows.first(),
                        _ => None,
                    };
                    let value = match (row, at) {
                        (Some(row), Some(at)) => row.columns.get(at).unwrap_or(&Value::Null),
                        _ => &Value::Null,
                    };
                    vector
                        .values
                        .push(layout::from_oka(value, ty).map_err(encode_failed)?);
                    vector.statuses.push(FieldStatus::Present as i32);
                    // An on-demand view's values have no event time: the epoch.
                    let row = row.filter(|_| !feature.on_demand);
                    vector
                        .event_timestamps
                        .push(row.map_or(epoch, |r| prost_types::Timestamp {
                            seconds: r.event_time.0.div_euclid(1_000_000),
                            nanos: (r.event_time.0.rem_euclid(1_000_000) * 1000) as i32,
                        }));
                }
                vector
            }
        };
        results.push(vector);
    }
    Ok(GetOnlineFeaturesResponse {
        metadata: Some(GetOnlineFeaturesResponseMetadata {
            feature_names: Some(FeatureList {
                val: plan.names().map(str::to_owned).collect(),
            }),
            feature_view_metadata: Vec::new(),
        }),
        results,
        status: false,
    })
}

/// A single-row write of `GrpcFeatureServer` (`Push`, `WriteToOnlineStore`)
/// as the `df` of Feast's HTTP write routes: `typed_features` as their values,
/// or `features` as strings.
fn df_of(
    features: &HashMap<String, String>,
    typed: &HashMap<String, ProtoValue>,
) -> Result<serde_json::Map<String, Json>, ApiError> {
    if !features.is_empty() && !typed.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "give `features` or `typed_features`, not both",
        ));
    }
    let mut df = serde_json::Map::new();
    for (name, value) in features {
        df.insert(name.clone(), Json::Array(vec![Json::from(value.as_str())]));
    }
    for (name, value) in typed {
        df.insert(name.clone(), Json::Array(vec![json_of(value)]));
    }
    Ok(df)
}

#[tonic::async_trait]
impl ServingService for FeastGrpc {
    async fn get_feast_serving_info(
        &self,
        _request: Request<GetFeastServingInfoRequest>,
    ) -> Result<Response<GetFeastServingInfoResponse>, Status> {
        Ok(Response::new(GetFeastServingInfoResponse {
            version: format!("oka {}", env!("CARGO_PKG_VERSION")),
        }))
    }

    async fn get_online_features(
        &self,
        request: Request<GetOnlineFeaturesRequest>,
    ) -> Result<Response<GetOnlineFeaturesResponse>, Status> {
        self.online(request, "feast.serving.ServingService/GetOnlineFeatures")
            .await
    }
}

#[tonic::async_trait]
impl GrpcFeatureServer for FeastGrpc {
    async fn push(&self, request: Request<PushRequest>) -> Result<Response<PushResponse>, Status> {
        let (metadata, extensions, r) = request.into_parts();
        let caller = Caller::of(&extensions);
        let method = (Route::FeastGrpc, "feast.serving.GrpcFeatureServer/Push");
        guard::grpc(
            &self.state,
            method,
            (&metadata, &caller),
            Scope::Write,
            async |_| {
                let feast = registry(&self.state)?;
                let to = if r.to.is_empty() { "online" } else { &r.to };
                let body = serde_json::json!({
                    "push_source_name": r.stream_feature_view,
                    "df": df_of(&r.features, &r.typed_features)?,
                    "to": to,
                });
                super::push(&self.state.shared, &feast, body.to_string().as_bytes()).await?;
                Ok(PushResponse { status: true })
            },
        )
        .await
    }

    async fn write_to_online_store(
        &self,
        request: Request<WriteToOnlineStoreRequest>,
    ) -> Result<Response<WriteToOnlineStoreResponse>, Status> {
        let (metadata, extensions, r) = request.into_parts();
        let caller = Caller::of(&extensions);
        let method = (
            Route::FeastGrpc,
            "feast.serving.GrpcFeatureServer/WriteToOnlineStore",
        );
        guard::grpc(
            &self.state,
            method,
            (&metadata, &caller),
            Scope::Write,
            async |_| {
                let feast = registry(&self.state)?;
                let body = serde_json::json!({
                    "feature_view_name": r.feature_view_name,
                    "df": df_of(&r.features, &r.typed_features)?,
                });
                super::write_to_online_store(
                    &self.state.shared,
                    &feast,
                    body.to_string().as_bytes(),
                )
                .await?;
                Ok(WriteToOnlineStoreResponse { status: true })
            },
        )
        .await
    }

    async fn get_online_features(
        &self,
        request: Request<GetOnlineFeaturesRequest>,
    ) -> Result<Response<GetOnlineFeaturesResponse>, Status> {
        self.online(request, "feast.serving.GrpcFeatureServer/GetOnlineFeatures")
            .await
    }
}
