//! Optional API keys with scopes.
//!
//! Keys come from a file (`--api-keys-file`) or the environment (`OKA_API_KEYS`),
//! one per line (or `;`-separated in the environment): `<key> <scope>[,<scope>…]`,
//! with scopes `read` (feature routes), `write` (ingest) and `admin`
//! (`POST /admin/reload`). Lines starting with `#` are comments. A request carries
//! its key as `Authorization: Bearer <key>` or `X-API-Key: <key>`. Keys are
//! compared in constant time and never logged or echoed, not even in the errors
//! about a malformed line. Health, readiness, metrics and stats (the admin port)
//! are open; reload and the console (`/ui`) need an `admin` key once one is
//! configured.
//!
//! Under mutual TLS (`--tls-client-ca`) a client certificate's identity gets
//! scopes the same way: `cert:<identity> <scope>[,<scope>…]`, where the identity
//! is one of the certificate's subject alternative names, a URI (a SPIFFE ID such
//! as `spiffe://cluster.local/ns/ml/sa/ranker`) or a DNS name. A request that
//! carries a key is judged by its key; one without is judged by its certificate.

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::request::Parts;
use oka_core::ErrorCode;
pub use oka_telemetry::http::ClientIdentity;

use crate::error::ApiError;

/// `X-API-Key`, as a header name (a `&str` name is parsed on every lookup).
const X_API_KEY: axum::http::HeaderName = axum::http::HeaderName::from_static("x-api-key");

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Read features (`/v1/features`, `/on_demand_compute`).
    Read,
    /// Write pipeline records (`/v1/ingest`).
    Write,
    /// Reload the spec and keys (`POST /admin/reload`).
    Admin,
}

impl Scope {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "read" => Some(Self::Read),
            "write" => Some(Self::Write),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }
}

struct Key {
    secret: Vec<u8>,
    read: bool,
    write: bool,
    admin: bool,
}

impl Key {
    fn allows(&self, scope: Scope) -> bool {
        match scope {
            Scope::Read => self.read,
            Scope::Write => self.write,
            Scope::Admin => self.admin,
        }
    }
}

/// The prefix of a key-file entry that gives a client certificate's identity
/// scopes.
const CERT_PREFIX: &str = "cert:";

/// The configured keys and certificate identities; none means authentication
/// is off.
#[derive(Default)]
pub struct ApiKeys {
    keys: Vec<Key>,
    /// `cert:` entries: the identity (not a secret) in `secret`.
    identities: Vec<Key>,
}

/// Who is calling, beyond the headers: the client certificate's identity when
/// the connection gave one (mutual TLS). An extractor that never fails.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The client certificate's identity, if any.
    pub identity: Option<ClientIdentity>,
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}

impl Caller {
    /// The caller of a request with these extensions (its client certificate's
    /// identity, set by the connection, on every port: HTTP and gRPC).
    pub fn of(extensions: &axum::http::Extensions) -> Self {
        Self {
            identity: extensions.get::<ClientIdentity>().cloned(),
        }
    }
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the keys themselves.
        f.debug_struct("ApiKeys")
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// Equal in time independent of where the inputs differ (and of the given key's
/// length beyond the lengths' comparison).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.ct_eq(b))
}

/// A key-file entry that is not a key with scopes. It names the entry (`origin`,
/// `unit` and number, e.g. `keys.txt line 3`) and the problem, and holds no word of
/// the entry: a key must not reach a log or an answer through its error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    /// No whitespace between a key and its scopes.
    #[error(
        "{at}: expected `<key> <scope>[,<scope>…]` (a key, a space, then read, write or admin)"
    )]
    Shape {
        /// Where: `<origin> <unit> <n>`.
        at: String,
    },
    /// A scope other than read, write or admin (often: key and scopes swapped).
    #[error(
        "{at}: the scopes are not read, write or admin (comma-separated, after the key); is the key written first?"
    )]
    Scope {
        /// Where: `<origin> <unit> <n>`.
        at: String,
    },
    /// A key under 16 characters.
    #[error("{at}: keys must be at least 16 characters")]
    TooShort {
        /// Where: `<origin> <unit> <n>`.
        at: String,
    },
    /// `cert:` with no identity after it.
    #[error(
        "{at}: `cert:` must be followed by a client certificate's identity (a URI such as spiffe://…, or a DNS name)"
    )]
    EmptyIdentity {
        /// Where: `<origin> <unit> <n>`.
        at: String,
    },
}

impl ApiKeys {
    /// Parses key lines; errors name the line (never the key).
    pub fn parse(text: &str) -> Result<Self, KeyFileError> {
        Self::parse_from("api keys", "line", text, &['\n'])
    }

    /// Parses entries separated by any of `separators`; errors name `origin`, the
    /// entry (`unit` and its number, e.g. `line 3`) and the problem, and never any
    /// word of the entry: a key and its scopes written the wrong way round must not
    /// print the key.
    pub fn parse_from(
        origin: &str,
        unit: &str,
        text: &str,
        separators: &[char],
    ) -> Result<Self, KeyFileError> {
        let (mut keys, mut identities) = (Vec::new(), Vec::new());
        for (i, line) in text.split(separators).enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{origin} {unit} {}", i + 1);
            let Some((secret, scopes)) = line.split_once(char::is_whitespace) else {
                return Err(KeyFileError::Shape { at });
            };
            let identity = secret.strip_prefix(CERT_PREFIX);
            let mut key = Key {
                secret: identity.unwrap_or(secret).as_bytes().to_vec(),
                read: false,
                write: false,
                admin: false,
            };
            for s in scopes.trim().split(',') {
                match Scope::parse(s.trim()) {
                    Some(Scope::Read) => key.read = true,
                    Some(Scope::Write) => key.write = true,
                    Some(Scope::Admin) => key.admin = true,
                    None => return Err(KeyFileError::Scope { at }),
                }
            }
            match identity {
                Some("") => return Err(KeyFileError::EmptyIdentity { at }),
                Some(_) => identities.push(key),
                None if secret.len() < 16 => return Err(KeyFileError::TooShort { at }),
                None => keys.push(key),
            }
        }
        Ok(Self { keys, identities })
    }

    /// These keys and `other`'s.
    pub fn merged(mut self, other: Self) -> Self {
        self.keys.extend(other.keys);
        self.identities.extend(other.identities);
        self
    }

    /// Whether any key is configured (authentication on).
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty() || !self.identities.is_empty()
    }

    /// Whether any key has the `admin` scope (reload then needs one).
    pub fn admin_enabled(&self) -> bool {
        self.keys.iter().chain(&self.identities).any(|k| k.admin)
    }

    /// How many certificate identities have scopes.
    pub fn identities(&self) -> usize {
        self.identities.len()
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.identities.is_empty()
    }

    /// Checks the request's key for `scope`, or without a key its client
    /// certificate's identity: 401 without a known key or a certificate, 403 when
    /// the key or identity lacks the scope. Always passes when authentication is
    /// off.
    pub fn check(
        &self,
        headers: &HeaderMap,
        caller: &Caller,
        scope: Scope,
    ) -> Result<(), ApiError> {
        if !self.enabled() {
            return Ok(());
        }
        // `X-API-Key` wins over `Authorization` when both are sent, so one that is
        // present but unreadable is refused, never passed over for the other.
        let api_key = match headers.get(&X_API_KEY).map(|v| v.to_str()) {
            Some(Err(_)) => {
                return Err(ApiError::new(
                    ErrorCode::Unauthenticated,
                    "the `X-API-Key` header is not readable: a key is visible ASCII text; send the key itself (it takes precedence over `Authorization`)",
                ));
            }
            Some(Ok(key)) => Some(key),
            None => None,
        };
        let given = api_key
            .or_else(|| {
                headers
                    .get(axum::http::header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| {
                        // The scheme name is case-insensitive (RFC 9110 §11.1).
                        let (scheme, token) = v.split_once(' ')?;
                        scheme.eq_ignore_ascii_case("bearer").then_some(token)
                    })
            })
            .map(str::trim);
        let Some(given) = given else {
            if let Some(identity) = &caller.identity {
                return self.check_identity(identity, scope);
            }
            return Err(ApiError::new(
                ErrorCode::Unauthenticated,
                "an API key is required (`Authorization: Bearer <key>` or `X-API-Key`)",
            ));
        };
        // Compare against every key, so the time taken does not tell which matched.
        let mut found: Option<&Key> = None;
        for k in &self.keys {
            if constant_time_eq(k.secret.as_slice(), given.as_bytes()) {
                found = Some(k);
            }
        }
        let key =
            found.ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, "unknown API key"))?;
        if key.allows(scope) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this API key lacks the `{}` scope", scope.name()),
            ))
        }
    }

    /// A certificate's identity for `scope`: the scopes of every `cert:` entry
    /// naming one of its names; 403 when none gives the scope.
    fn check_identity(&self, identity: &ClientIdentity, scope: Scope) -> Result<(), ApiError> {
        let mut listed = false;
        for entry in &self.identities {
            if identity
                .names()
                .iter()
                .any(|n| n.as_bytes() == entry.secret)
            {
                listed = true;
                if entry.allows(scope) {
                    return Ok(());
                }
            }
        }
        let names = match identity.names() {
            [] => "no URI or DNS name".to_owned(),
            names => names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let message = if listed {
            format!(
                "this client certificate ({names}) lacks the `{}` scope",
                scope.name()
            )
        } else {
            format!(
                "this client certificate ({names}) has no scopes: list its identity in the API-keys file (`cert:<identity> {}`), or send an API key",
                scope.name()
            )
        };
        Err(ApiError::new(ErrorCode::Forbidden, message))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const KEYS: &str = "# comment\nreader-key-0123456789 read\nwriter-key-0123456789 read,write\n";

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
        h
    }

    #[test]
    fn scopes_and_header_forms() {
        let k = ApiKeys::parse(KEYS).unwrap();
        assert_eq!(k.len(), 2);
        assert!(
            k.check(
                &headers("authorization", "Bearer reader-key-0123456789"),
                &Caller::default(),
                Scope::Read
            )
            .is_ok()
        );
        assert!(
            k.check(
                &headers("x-api-key", "writer-key-0123456789"),
                &Caller::default(),
                Scope::Write
            )
            .is_ok()
        );
        let e = k
            .check(
                &headers("x-api-key", "reader-key-0123456789"),
                &Caller::default(),
                Scope::Write,
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        let e = k
            .check(&HeaderMap::new(), &Caller::default(), Scope::Read)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated);
        let e = k
            .check(
                &headers("x-api-key", "reader-key-012345678"),
                &Caller::default(),
                Scope::Read,
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated);
        assert!(!format!("{k:?}").contains("reader"), "keys never printed");
    }

    #[test]
    fn an_unreadable_x_api_key_is_refused_whatever_else_is_sent() {
        let k = ApiKeys::parse(KEYS).unwrap();
        let mut h = headers("authorization", "Bearer reader-key-0123456789");
        h.insert(
            "x-api-key",
            HeaderValue::from_bytes(b"reader-key-\xff0123456789").unwrap(),
        );
        let e = k.check(&h, &Caller::default(), Scope::Read).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated);
        assert!(
            e.message.contains("`X-API-Key` header is not readable"),
            "{}",
            e.message
        );
        // A readable but unknown X-API-Key also wins over a valid bearer token.
        let mut h = headers("authorization", "Bearer reader-key-0123456789");
        h.insert(
            "x-api-key",
            HeaderValue::from_static("not-a-key-0123456789"),
        );
        assert_eq!(
            k.check(&h, &Caller::default(), Scope::Read)
                .unwrap_err()
                .code,
            ErrorCode::Unauthenticated
        );
    }

    #[test]
    fn off_when_empty_and_bad_lines_rejected() {
        assert!(
            ApiKeys::parse("")
                .unwrap()
                .check(&HeaderMap::new(), &Caller::default(), Scope::Write)
                .is_ok()
        );
        assert!(ApiKeys::parse("short read").is_err());
        let e = ApiKeys::parse("long-enough-key-0000 superuser")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 1") && !e.contains("long-enough") && !e.contains("superuser"),
            "{e}"
        );
    }

    #[test]
    fn a_key_and_scope_swapped_names_the_line_and_never_the_key() {
        let text = "# keys\nreader-key-0123456789 read\nwrite s3cr3t-t0ken-abcdefgh\n";
        let e = ApiKeys::parse_from("keys.txt", "line", text, &['\n'])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("keys.txt line 3: "), "{e}");
        assert!(e.contains("is the key written first"), "{e}");
        assert!(!e.contains("s3cr3t") && !e.contains("abcdefgh"), "{e}");
        let e = ApiKeys::parse_from("OKA_API_KEYS", "entry", "s3cr3t-t0ken-abcdefgh", &[';'])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("OKA_API_KEYS entry 1: "), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
    }

    #[test]
    fn admin_keys_guard_reload() {
        let k = ApiKeys::parse("reader-key-0123456789 read\nops-key-0123456789ab admin").unwrap();
        assert!(k.admin_enabled());
        let e = k
            .check(
                &headers("x-api-key", "reader-key-0123456789"),
                &Caller::default(),
                Scope::Admin,
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(
            k.check(
                &headers("x-api-key", "ops-key-0123456789ab"),
                &Caller::default(),
                Scope::Admin
            )
            .is_ok()
        );
        assert!(
            !ApiKeys::parse("reader-key-0123456789 read")
                .unwrap()
                .admin_enabled()
        );
    }

    #[test]
    fn certificate_identities_get_scopes_and_a_key_wins() {
        let k = ApiKeys::parse(
            "reader-key-0123456789 read\ncert:spiffe://cluster.local/ns/ml/sa/ranker read\ncert:loader.ml.svc read,write",
        )
        .unwrap();
        assert!(k.enabled());
        assert_eq!((k.len(), k.identities()), (1, 2));
        let caller = |names: &[&str]| Caller {
            identity: Some(ClientIdentity::from_names(
                names.iter().map(|n| (*n).to_owned()),
            )),
        };
        let none = HeaderMap::new();
        let ranker = caller(&["spiffe://cluster.local/ns/ml/sa/ranker"]);
        assert!(k.check(&none, &ranker, Scope::Read).is_ok());
        let e = k.check(&none, &ranker, Scope::Write).unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(
            e.message.contains("lacks the `write` scope"),
            "{}",
            e.message
        );
        // Any of the certificate's names may be the listed one.
        let loader = caller(&["spiffe://x/y", "loader.ml.svc"]);
        assert!(k.check(&none, &loader, Scope::Write).is_ok());
        // A valid certificate whose identity is not listed: 403, saying what to add.
        let stranger = caller(&["spiffe://cluster.local/ns/ml/sa/other"]);
        let e = k.check(&none, &stranger, Scope::Read).unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(
            e.message
                .contains("`spiffe://cluster.local/ns/ml/sa/other`"),
            "{}",
            e.message
        );
        assert!(e.message.contains("cert:<identity> read"), "{}", e.message);
        let e = k.check(&none, &caller(&[]), Scope::Read).unwrap_err();
        assert!(e.message.contains("no URI or DNS name"), "{}", e.message);
        // A key, when sent, decides: a wrong one is refused even with a good certificate.
        let e = k
            .check(
                &headers("x-api-key", "wrong-key-0123456789"),
                &ranker,
                Scope::Read,
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated);
        assert!(
            k.check(
                &headers("x-api-key", "reader-key-0123456789"),
                &stranger,
                Scope::Read
            )
            .is_ok()
        );
        // `cert:` needs an identity; identities need no minimum length.
        let e = ApiKeys::parse("cert: read").unwrap_err().to_string();
        assert!(
            e.contains("line 1") && e.contains("`cert:` must be followed"),
            "{e}"
        );
        assert!(ApiKeys::parse("cert:a.b read").is_ok());
        assert!(
            ApiKeys::parse("cert:ops.svc admin")
                .unwrap()
                .admin_enabled()
        );
    }

    #[test]
    fn constant_time_eq_is_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
