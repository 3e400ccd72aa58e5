//! The OpenAPI 3.1 documents of both ports, assembled from the handlers'
//! `#[utoipa::path]` attributes and the request and answer types' schemas, and
//! served on the admin port (`/openapi.json`, `/openapi-admin.json`). `oka
//! openapi` writes the same text to `docs/`; a test fails when those files are
//! stale.

use std::sync::LazyLock;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use oka_core::ErrorCode;
use oka_core::encode::openapi::{FeatureResponse, KeyStatus, Record};
use oka_core::request::FeatureRequest;
use oka_ingest::body::{BodySummary, RawBody, Rejection};
use utoipa::OpenApi;

use crate::api::volga::schema::{VolgaFeatureRequest, VolgaFeatureResponse};
use crate::error::{ErrorBody, ErrorDetail};
use crate::openapi::{ApiKeys, render, to_json};

/// The serving port's document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Oka: serving port",
        version = env!("CARGO_PKG_VERSION"),
        description = "Oka's feature API (default port 1122): feature requests in Oka's form (`POST /v1/features`) and Volga's (`/on_demand_compute`), the registry, and ingest. docs/api.md explains every field and error. Every route first checks the API key (when keys are configured), then reads the body (`--max-body-bytes`, `--body-read-timeout-ms`), then admits the request (`--max-in-flight-requests`). An unknown path is a `404 not_found` and a known path with another method a `405 method_not_allowed` (with `Allow`), both with the JSON error body. Where a schema says `integer`, a whole number written `2.0` is taken as JSON Schema counts it (`deadline_ms`, `n`).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "http://127.0.0.1:1122", description = "A local `oka serve` (`--listen`).")),
    paths(
        crate::api::oka::post_features,
        crate::api::volga::post_volga,
        crate::api::volga::get_volga,
        crate::api::oka::get_catalog,
        crate::api::oka::post_ingest,
    ),
    components(schemas(
        FeatureRequest, VolgaFeatureRequest, FeatureResponse, VolgaFeatureResponse, Record, KeyStatus,
        ErrorBody, ErrorDetail, ErrorCode, RawBody, BodySummary, Rejection,
        crate::catalog::Catalog,
    )),
    modifiers(&ApiKeys),
    tags(
        (name = "features", description = "Feature requests: read pipeline features, compute on-demand ones."),
        (name = "volga", description = "Volga's on-demand routes and wire format, for Volga's clients."),
        (name = "registry", description = "The loaded spec."),
        (name = "ingest", description = "Writing pipeline records."),
    ),
)]
struct ServingApi;

/// The admin port's document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Oka: admin port",
        version = env!("CARGO_PKG_VERSION"),
        description = "Oka's admin port (default `127.0.0.1:9122`, `--admin-listen`): health, readiness, metrics, stats, reload, and the OpenAPI documents of both ports. Its reads need no API key. An unknown path is a `404 not_found` and a known path with another method a `405 method_not_allowed`, with the JSON error body.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "http://127.0.0.1:9122", description = "A local `oka serve` (`--admin-listen`).")),
    paths(
        super::admin::healthz,
        super::admin::readyz,
        super::admin::metrics,
        super::admin::stats,
        super::admin::reload,
        openapi_serving,
        openapi_admin,
    ),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode)),
    modifiers(&ApiKeys),
    tags(
        (name = "health", description = "Liveness and readiness probes."),
        (name = "metrics", description = "Prometheus metrics and Volga's `/stats`."),
        (name = "admin", description = "Operations."),
        (name = "openapi", description = "These documents."),
    ),
)]
struct AdminApi;

static SERVING: LazyLock<String> = LazyLock::new(|| {
    render(&keys_required(json_in_path(
        to_json(&ServingApi::openapi()),
    )))
});

/// A feature request needs a key list: `keys`, or `feature_keys` naming a
/// feature (`400 missing_keys` otherwise), except on Volga's routes with no
/// targets. utoipa's object schemas cannot carry the `anyOf` that says so.
fn keys_required(mut doc: serde_json::Value) -> serde_json::Value {
    let keys = serde_json::json!([
        {"required": ["keys"], "properties": {"keys": {"type": "array"}}},
        {"required": ["feature_keys"], "properties": {"feature_keys": {"type": "object", "minProperties": 1}}},
    ]);
    for (name, empty_targets) in [("FeatureRequest", false), ("VolgaFeatureRequest", true)] {
        let mut any_of = keys.clone();
        if empty_targets && let Some(a) = any_of.as_array_mut() {
            a.push(serde_json::json!({"properties": {"target_features": {"maxItems": 0}}}));
        }
        if let Some(schema) = doc
            .pointer_mut(&format!("/components/schemas/{name}"))
            .and_then(|s| s.as_object_mut())
        {
            schema.insert("anyOf".to_owned(), any_of);
        }
    }
    doc
}

/// The `{json}` parameter of `GET /on_demand_compute/{json}` described by its
/// content (OpenAPI's `content`: JSON of a `VolgaFeatureRequest`), not as any
/// string, which utoipa's parameters cannot say: a client generated from the
/// document then sends a request, not `0`.
fn json_in_path(mut doc: serde_json::Value) -> serde_json::Value {
    let params = doc
        .pointer_mut("/paths/~1on_demand_compute~1{json}/get/parameters")
        .and_then(|p| p.as_array_mut());
    for p in params.into_iter().flatten() {
        if p["name"] == "json"
            && let Some(p) = p.as_object_mut()
        {
            p.remove("schema");
            p.remove("example");
            p.insert(
                "content".to_owned(),
                serde_json::json!({"application/json": {
                    "schema": {"$ref": "#/components/schemas/VolgaFeatureRequest"},
                    "example": {"target_features": ["simple_feature"], "feature_keys": {"simple_feature": [{"id": "test-id-21"}]}},
                }}),
            );
        }
    }
    doc
}
static ADMIN: LazyLock<String> = LazyLock::new(|| render(&to_json(&AdminApi::openapi())));

/// The serving port's OpenAPI document (`docs/openapi.json`).
pub fn serving_document() -> &'static str {
    &SERVING
}

/// The admin port's OpenAPI document (`docs/openapi-admin.json`).
pub fn admin_document() -> &'static str {
    &ADMIN
}

fn document(text: &'static str) -> Response {
    let mut resp = Response::new(Body::from(text));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", tag = "openapi", operation_id = "openapi_serving",
    summary = "The serving port's OpenAPI document",
    description = "The OpenAPI 3.1 document of the serving port (feature requests, the registry, ingest): the text of `docs/openapi.json`.",
    responses((status = 200, description = "The document.", content_type = "application/json", body = Object)))]
pub(super) async fn openapi_serving() -> Response {
    document(serving_document())
}

/// `GET /openapi-admin.json`.
#[utoipa::path(get, path = "/openapi-admin.json", tag = "openapi", operation_id = "openapi_admin",
    summary = "The admin port's OpenAPI document",
    description = "The OpenAPI 3.1 document of the admin port (this document): the text of `docs/openapi-admin.json`.",
    responses((status = 200, description = "The document.", content_type = "application/json", body = Object)))]
pub(super) async fn openapi_admin() -> Response {
    document(admin_document())
}
