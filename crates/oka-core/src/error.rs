//! Errors: spec validation errors (load time) and request errors (serve time).

use std::fmt;

/// ` (did you mean `x`?)` for the candidate closest to `name` when one is close
/// (an edit or two away, or a different case), else nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// The candidate closest to `name`, when one is close (an edit or two away, or a
/// different case).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = match name.chars().count() {
        0..=3 => 1,
        4..=8 => 2,
        _ => 3,
    };
    candidates
        .into_iter()
        .map(|c| (edit_distance(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of neighbours counted as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev2: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(prev2[j - 2] + 1);
            }
        }
        prev2 = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// One problem in a spec, located by file and by the path of the offending item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Where the spec came from (a file path, or `<demo>`).
    pub origin: String,
    /// The item's path in the file, e.g. `features.simple_feature.udf.expr.value`.
    pub path: String,
    /// What is wrong, lowercase.
    pub message: String,
}

impl SpecError {
    /// A new error.
    pub fn new(
        origin: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            origin: origin.into(),
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: {}: {}", self.origin, self.path, self.message)
        }
    }
}

/// Every problem found in a spec (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecErrors(pub Vec<SpecError>);

impl SpecErrors {
    /// A single error.
    pub fn one(e: SpecError) -> Self {
        Self(vec![e])
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Declares an error that is a message for a person (it names the thing, the
/// place and what to do) and keeps the error that caused it, when there was one,
/// as its [`std::error::Error::source`]: the message says the cause in words, the
/// source keeps it for a program (its kind, its own chain). Two are equal when
/// their messages are.
///
/// ```
/// oka_core::described_error! {
///     /// Why a file cannot be used.
///     pub struct FileError;
/// }
/// let io = std::io::Error::from(std::io::ErrorKind::NotFound);
/// let e = FileError::caused("spec.yaml: cannot be read (not found)", io);
/// assert_eq!(e.to_string(), "spec.yaml: cannot be read (not found)");
/// assert!(std::error::Error::source(&e).is_some());
/// assert!(std::error::Error::source(&FileError::new("no cause")).is_none());
/// ```
#[macro_export]
macro_rules! described_error {
    ($(#[$meta:meta])* $vis:vis struct $name:ident;) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name {
            message: String,
            cause: Option<std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>>,
        }

        #[allow(dead_code)]
        impl $name {
            /// An error with no cause beyond what the message says.
            pub fn new(message: impl Into<String>) -> Self {
                Self { message: message.into(), cause: None }
            }

            /// An error caused by `cause` (kept as its source).
            pub fn caused(
                message: impl Into<String>,
                cause: impl std::error::Error + Send + Sync + 'static,
            ) -> Self {
                Self { message: message.into(), cause: Some(std::sync::Arc::new(cause)) }
            }

            /// The message, in words.
            pub fn message(&self) -> &str {
                &self.message
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.message)
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.cause.as_deref().map(|c| c as &(dyn std::error::Error + 'static))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.message == other.message
            }
        }

        impl Eq for $name {}
    };
}

/// Declares [`ErrorCode`] from one table (variant, wire name, doc), so that its
/// variants, [`ErrorCode::as_str`] and [`ErrorCode::ALL`] cannot disagree.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident = $wire:literal,)+) => {
        /// Machine-readable error codes. Only the server maps them to HTTP statuses.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl ErrorCode {
            /// Every code, in declaration order (the API's list of codes: the
            /// OpenAPI document's enum is made from it).
            pub const ALL: &'static [ErrorCode] = &[$(Self::$variant,)+];

            /// The snake_case name used on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)+
                }
            }

            /// What the code means, in a sentence (its doc comment).
            pub fn describe(self) -> &'static str {
                match self {
                    $(Self::$variant => concat!($($doc),+).trim_ascii(),)+
                }
            }
        }
    };
}

error_codes! {
    /// The body is not valid JSON, or not the expected shape.
    MalformedRequest = "malformed_request",
    /// A field of the request is not one Oka knows.
    UnknownField = "unknown_field",
    /// A target or referenced feature does not exist.
    UnknownFeature = "unknown_feature",
    /// The request is well-formed but not valid (empty targets, bad keys, …).
    InvalidRequest = "invalid_request",
    /// No keys were given for a target.
    MissingKeys = "missing_keys",
    /// A key object lacks a key field or has one of the wrong type.
    InvalidKey = "invalid_key",
    /// `udf_args` names an argument the feature does not declare.
    UnknownUdfArg = "unknown_udf_arg",
    /// A UDF argument has the wrong type, or a required one is missing.
    InvalidUdfArg = "invalid_udf_arg",
    /// `query_args` is missing a parameter or has one of the wrong type.
    InvalidQueryArg = "invalid_query_arg",
    /// The body exceeds the size limit.
    PayloadTooLarge = "payload_too_large",
    /// No valid API key was given.
    Unauthenticated = "unauthenticated",
    /// The API key lacks the scope this route needs.
    Forbidden = "forbidden",
    /// What a reload read is invalid: the spec, the API keys or a TLS
    /// certificate or key (the old ones keep serving).
    InvalidSpec = "invalid_spec",
    /// No such route.
    NotFound = "not_found",
    /// The route exists but not for this method.
    MethodNotAllowed = "method_not_allowed",
    /// The store cannot be reached.
    StoreUnavailable = "store_unavailable",
    /// The store did not answer in time.
    StoreTimeout = "store_timeout",
    /// The console's try-it form could not reach the serving port (it is not
    /// listening yet, or it is shutting down).
    ServingUnavailable = "serving_unavailable",
    /// The request's deadline passed.
    DeadlineExceeded = "deadline_exceeded",
    /// A UDF run in a worker process (Python) ran past its time limit for a key
    /// of the request; the worker was killed and replaced.
    UdfTimeout = "udf_timeout",
    /// No worker process can run the request's UDF now (none alive: the message
    /// says why); retry later.
    UdfUnavailable = "udf_unavailable",
    /// An on-demand feature's UDF failed (raised, or returned what its outputs
    /// cannot hold) for a row of a request on an API with no per-key errors
    /// (Feast's): the message names the feature, the row and the failure.
    UdfFailed = "udf_failed",
    /// The server refused the request to protect itself.
    Overloaded = "overloaded",
    /// The request body did not arrive within the body-read timeout.
    BodyTimeout = "body_timeout",
    /// Too many reloads: one is running, or the last was too recent.
    TooManyReloads = "too_many_reloads",
    /// The store cannot do what the request needs: it answers only `latest` reads
    /// and takes no writes (a Volga-layout store).
    UnsupportedByStore = "unsupported_by_store",
    /// A bug or an unexpected failure; details are logged, not returned.
    Internal = "internal",
}

/// The OpenAPI schema of an error code: a string enum of every code's wire
/// name, made from [`ErrorCode::ALL`].
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let meanings: String = ErrorCode::ALL
            .iter()
            .map(|c| format!("\n- `{}`: {}", c.as_str(), c.describe()))
            .collect();
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
            .description(Some(format!(
                "What went wrong, machine-readable. The codes:{meanings}"
            )))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ErrorCode {}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request that cannot be served, with a code and a message naming the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// What kind of problem.
    pub code: ErrorCode,
    /// Lowercase, names the offending value; never internals.
    pub message: String,
}

impl RequestError {
    /// A new error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_snake_case_name_and_a_description() {
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert!(names.contains(&"malformed_request") && names.contains(&"internal"));
        assert!(
            names
                .iter()
                .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        assert_eq!(
            ErrorCode::UnsupportedByStore.describe(),
            "The store cannot do what the request needs: it answers only `latest` reads and takes no writes (a Volga-layout store)."
        );
    }
}
