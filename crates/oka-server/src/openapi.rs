//! What the OpenAPI documents of both ports are made of, besides the handlers'
//! `#[utoipa::path]` attributes (assembled in `router::docs`): the error answers
//! of each route, made from its list of error codes and [`status_of`]; the
//! security schemes; the rendering to text.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use oka_core::ErrorCode;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, Ref, RefOr};

use crate::error::{status_header, status_of};

/// The content type of errors on Volga's routes unless JSON is asked for.
pub const TEXT_ERROR: &str = "text/plain; charset=utf-8";

/// The error answers of a route that can fail with `codes`: one response per
/// status, listing its codes, with the JSON error body (and, with `text`, the
/// plain-text `code: message` body of Volga's routes) and the header every error
/// of that status carries.
pub fn error_responses(codes: &[ErrorCode], text: bool) -> BTreeMap<String, RefOr<Response>> {
    let mut by_status: BTreeMap<u16, Vec<ErrorCode>> = BTreeMap::new();
    for &code in codes {
        by_status
            .entry(status_of(code).as_u16())
            .or_default()
            .push(code);
    }
    by_status
        .into_iter()
        .map(|(status, codes)| {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (
                status.as_str().to_owned(),
                error_response(status, &codes, text).into(),
            )
        })
        .collect()
}

fn error_response(status: StatusCode, codes: &[ErrorCode], text: bool) -> Response {
    let listed: Vec<String> = codes.iter().map(|c| format!("`{c}`")).collect();
    let mut description = format!(
        "{}: `error.code` is {}{}.",
        status.canonical_reason().unwrap_or("Error"),
        if codes.len() > 1 { "one of " } else { "" },
        listed.join(", ")
    );
    if text {
        description.push_str(" As plain text, `<code>: <message>`, unless the request's `Accept` names `application/json`.");
    }
    let mut response = ResponseBuilder::new().description(description).content(
        "application/json",
        Content::new(Some(Ref::from_schema_name("Error"))),
    );
    if text {
        let plain = ObjectBuilder::new()
            .schema_type(Type::String)
            .examples([format!("{}: …\n", codes[0])]);
        response = response.content(TEXT_ERROR, Content::new(Some(plain)));
    }
    if let Some((name, value)) = status_header(status) {
        let (name, schema, description) = if name == axum::http::header::RETRY_AFTER {
            (
                "Retry-After",
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1)),
                "Seconds to wait before retrying.",
            )
        } else {
            (
                "WWW-Authenticate",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .examples([value]),
                "The authentication scheme: `Bearer`.",
            )
        };
        let header = utoipa::openapi::header::HeaderBuilder::new()
            .schema(schema)
            .description(Some(description))
            .build();
        response = response.header(name, header);
    }
    response.build()
}

/// Declares a route's documented error answers: a type whose
/// [`utoipa::IntoResponses`] are [`error_responses`] of its codes.
macro_rules! route_errors {
    ($(#[doc = $doc:literal])+ $name:ident, text: $text:literal, [$($code:ident),+ $(,)?]) => {
        $(#[doc = $doc])+
        #[derive(Debug)]
        pub struct $name;

        impl $name {
            /// The codes this route can answer with.
            pub const CODES: &'static [ErrorCode] = &[$(ErrorCode::$code),+];
        }

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                error_responses(Self::CODES, $text)
            }
        }
    };
}

route_errors! {
    /// `POST /v1/features`: the gate (key, body, admission), the request's
    /// validation, the store and the deadline.
    FeatureErrors, text: false, [
        Unauthenticated, Forbidden, PayloadTooLarge, BodyTimeout, Overloaded,
        MalformedRequest, UnknownField, InvalidRequest, MissingKeys, InvalidKey,
        UnknownUdfArg, InvalidUdfArg, InvalidQueryArg, UnknownFeature, UnsupportedByStore,
        StoreUnavailable, StoreTimeout, DeadlineExceeded, UdfTimeout, UdfUnavailable, Internal,
    ]
}

route_errors! {
    /// `POST /on_demand_compute`: as `/v1/features`, but unknown top-level fields
    /// are ignored, and errors are plain text unless JSON is asked for.
    VolgaPostErrors, text: true, [
        Unauthenticated, Forbidden, PayloadTooLarge, BodyTimeout, Overloaded,
        MalformedRequest, InvalidRequest, MissingKeys,
        UnknownUdfArg, InvalidUdfArg, InvalidQueryArg, UnknownFeature, UnsupportedByStore,
        StoreUnavailable, StoreTimeout, DeadlineExceeded, UdfTimeout, UdfUnavailable, Internal,
    ]
}

route_errors! {
    /// `GET /on_demand_compute/{json}`: as the POST, without a body to read.
    VolgaGetErrors, text: true, [
        Unauthenticated, Forbidden, PayloadTooLarge, Overloaded,
        MalformedRequest, InvalidRequest, MissingKeys,
        UnknownUdfArg, InvalidUdfArg, InvalidQueryArg, UnknownFeature, UnsupportedByStore,
        StoreUnavailable, StoreTimeout, DeadlineExceeded, UdfTimeout, UdfUnavailable, Internal,
    ]
}

route_errors! {
    /// `GET /v1/features`: the key check and admission.
    CatalogErrors, text: false, [Unauthenticated, Forbidden, Overloaded]
}

route_errors! {
    /// `POST /v1/ingest`: the gate (key, body, the ingest budget, admission), the
    /// body's shape and feature, the store.
    IngestErrors, text: false, [
        Unauthenticated, Forbidden, PayloadTooLarge, BodyTimeout, Overloaded,
        MalformedRequest, UnknownField, InvalidRequest, UnknownFeature, UnsupportedByStore,
        StoreUnavailable, StoreTimeout, Internal,
    ]
}

route_errors! {
    /// `POST /admin/reload`: the admin key, an invalid spec, too many reloads, a
    /// server without a spec file.
    ReloadErrors, text: false, [
        Unauthenticated, Forbidden, InvalidSpec, InvalidRequest, TooManyReloads, Internal,
    ]
}

/// The security schemes of the serving port (and of `/admin/reload`): an API key
/// as a bearer token or in `X-API-Key`. Both are optional: without configured
/// keys the server checks none.
#[derive(Debug)]
pub struct ApiKeys;

impl utoipa::Modify for ApiKeys {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key: `Authorization: Bearer <key>`. Needed only when the server has API keys configured (`--api-keys-file`); the route's scope (`read`, `write`, `admin`) must be among the key's.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-API-Key",
                "An API key in `X-API-Key` (used when both headers are sent). Needed only when the server has API keys configured.",
            ))),
        );
    }
}

/// The document as JSON, every header a response names marked required (a
/// documented header is always sent).
pub fn to_json(api: &utoipa::openapi::OpenApi) -> serde_json::Value {
    let mut doc = serde_json::to_value(api).unwrap_or_default();
    let operations = doc
        .get_mut("paths")
        .and_then(|p| p.as_object_mut())
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut());
    for op in operations {
        let responses = op.get_mut("responses").and_then(|r| r.as_object_mut());
        for response in responses.into_iter().flat_map(|r| r.values_mut()) {
            let headers = response.get_mut("headers").and_then(|h| h.as_object_mut());
            for header in headers.into_iter().flat_map(|h| h.values_mut()) {
                header["required"] = serde_json::Value::Bool(true);
            }
        }
    }
    doc
}

/// The document as text: pretty JSON in a stable key order (utoipa's, which
/// keeps the code's declaration order), with a trailing newline.
pub fn render(doc: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_default();
    text.push('\n');
    text
}
