//! The one place where error codes become HTTP statuses.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use oka_core::{ErrorCode, RequestError};
use oka_storage::{StoreError, StoreErrorKind};
use serde::Serialize;

/// The JSON body of every error: `{"error": {"code": …, "message": …}}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    /// What went wrong.
    pub error: ErrorDetail<'a>,
}

/// The `error` of an error body.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail<'a> {
    /// The error code; each code has one HTTP status.
    #[schema(value_type = ErrorCode)]
    pub code: &'static str,
    /// What is wrong, naming the offending value; for `internal`, always
    /// `internal error`.
    pub message: &'a str,
}

/// An error answered to a client: `{"error": {"code": …, "message": …}}`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The code.
    pub code: ErrorCode,
    /// The message; for 5xx a fixed text, never internals.
    pub message: String,
}

impl ApiError {
    /// A new error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status for the code.
    pub fn status(&self) -> StatusCode {
        status_of(self.code)
    }
}

/// The status for each code.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::MalformedRequest
        | ErrorCode::UnknownField
        | ErrorCode::InvalidRequest
        | ErrorCode::MissingKeys
        | ErrorCode::InvalidKey
        | ErrorCode::UnknownUdfArg
        | ErrorCode::InvalidUdfArg
        | ErrorCode::InvalidQueryArg
        | ErrorCode::InvalidSpec => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::UnknownFeature | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::TooManyReloads => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::UnsupportedByStore => StatusCode::CONFLICT,
        ErrorCode::Overloaded
        | ErrorCode::StoreUnavailable
        | ErrorCode::UdfUnavailable
        | ErrorCode::ServingUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::StoreTimeout | ErrorCode::DeadlineExceeded | ErrorCode::UdfTimeout => {
            StatusCode::GATEWAY_TIMEOUT
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> Self {
        Self::new(e.code, e.message)
    }
}

/// What a client is told when the store cannot do what its request needs.
pub const UNSUPPORTED_BY_STORE: &str = "this server reads a store in Volga's layout, which holds only the latest record of each key and takes no writes: ask for `latest` reads (no `n`, `start` or `end` in `query_args`), and write through Volga's pipeline";

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        // The details stay in the log; the client gets the kind. An outage of the
        // store is logged once, when it starts, by the server's `StoreWatch`.
        if e.kind.is_outage() || e.kind == StoreErrorKind::Unsupported {
            tracing::debug!(kind = e.kind.label(), error = %e.message, "store call failed");
        } else {
            tracing::warn!(kind = e.kind.label(), error = %e.message, "store call failed");
        }
        match e.kind {
            StoreErrorKind::Timeout => Self::new(
                ErrorCode::StoreTimeout,
                "the feature store did not answer in time",
            ),
            // Credentials or configuration the store refuses: this instance
            // cannot serve, another may; the client cannot mend it either way.
            StoreErrorKind::Unavailable
            | StoreErrorKind::Unauthorized
            | StoreErrorKind::Misconfigured => Self::new(
                ErrorCode::StoreUnavailable,
                "the feature store is unavailable",
            ),
            StoreErrorKind::Unsupported => {
                Self::new(ErrorCode::UnsupportedByStore, UNSUPPORTED_BY_STORE)
            }
            _ => Self::new(ErrorCode::Internal, "internal error"),
        }
    }
}

impl ApiError {
    /// The error as plain text, `code: message` (Volga's routes: Volga's client
    /// shows a body it cannot parse as JSON, and reports a JSON error body as a
    /// missing `results` field).
    pub fn into_text_response(self) -> Response {
        let body = format!("{}: {}\n", self.code.as_str(), self.message);
        self.respond(body, "text/plain; charset=utf-8")
    }

    fn respond(self, body: String, content_type: &'static str) -> Response {
        let status = self.status();
        let mut resp = (status, body).into_response();
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        // For the live statistics: shed or failed (see `router::tracked`).
        resp.extensions_mut().insert(self.code);
        if let Some((name, value)) = status_header(status) {
            resp.headers_mut()
                .insert(name, HeaderValue::from_static(value));
        }
        // The body may be partly unread (408, 413): the connection cannot carry
        // another request.
        if matches!(
            self.code,
            ErrorCode::BodyTimeout | ErrorCode::PayloadTooLarge
        ) {
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

/// The header every error answer of `status` carries besides its content type:
/// `WWW-Authenticate: Bearer` on 401, `Retry-After: 1` on 429 and 503 (a 429 from
/// `/admin/reload` may say more seconds). The OpenAPI documents state the same.
pub fn status_header(status: StatusCode) -> Option<(HeaderName, &'static str)> {
    match status {
        StatusCode::UNAUTHORIZED => Some((header::WWW_AUTHENTICATE, "Bearer")),
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
            Some((header::RETRY_AFTER, "1"))
        }
        _ => None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str(),
                message: &self.message,
            },
        };
        let body = serde_json::to_string(&body).unwrap_or_default();
        self.respond(body, "application/json")
    }
}

pub use oka_telemetry::words::io_reason;
