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

use axum::http::HeaderMap;
use oka_core::ErrorCode;

use crate::error::ApiError;

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

/// The configured keys; empty means authentication is off.
#[derive(Default)]
pub struct ApiKeys {
    keys: Vec<Key>,
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
        let mut keys = Vec::new();
        for (i, line) in text.split(separators).enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{origin} {unit} {}", i + 1);
            let Some((secret, scopes)) = line.split_once(char::is_whitespace) else {
                return Err(KeyFileError::Shape { at });
            };
            let mut key = Key {
                secret: secret.as_bytes().to_vec(),
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
            if secret.len() < 16 {
                return Err(KeyFileError::TooShort { at });
            }
            keys.push(key);
        }
        Ok(Self { keys })
    }

    /// These keys and `other`'s.
    pub fn merged(mut self, other: Self) -> Self {
        self.keys.extend(other.keys);
        self
    }

    /// Whether any key is configured (authentication on).
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Whether any key has the `admin` scope (reload then needs one).
    pub fn admin_enabled(&self) -> bool {
        self.keys.iter().any(|k| k.admin)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks the request's key for `scope`: 401 without a known key, 403 when the
    /// key lacks the scope. Always passes when authentication is off.
    pub fn check(&self, headers: &HeaderMap, scope: Scope) -> Result<(), ApiError> {
        if !self.enabled() {
            return Ok(());
        }
        // `X-API-Key` wins over `Authorization` when both are sent, so one that is
        // present but unreadable is refused, never passed over for the other.
        let api_key = match headers.get("x-api-key").map(|v| v.to_str()) {
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
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| {
                        // The scheme name is case-insensitive (RFC 9110 §11.1).
                        let (scheme, token) = v.split_once(' ')?;
                        scheme.eq_ignore_ascii_case("bearer").then_some(token)
                    })
            })
            .map(str::trim);
        let Some(given) = given else {
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
        let allowed = match scope {
            Scope::Read => key.read,
            Scope::Write => key.write,
            Scope::Admin => key.admin,
        };
        if allowed {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("this API key lacks the `{}` scope", scope.name()),
            ))
        }
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
                Scope::Read
            )
            .is_ok()
        );
        assert!(
            k.check(&headers("x-api-key", "writer-key-0123456789"), Scope::Write)
                .is_ok()
        );
        let e = k
            .check(&headers("x-api-key", "reader-key-0123456789"), Scope::Write)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        let e = k.check(&HeaderMap::new(), Scope::Read).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unauthenticated);
        let e = k
            .check(&headers("x-api-key", "reader-key-012345678"), Scope::Read)
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
        let e = k.check(&h, Scope::Read).unwrap_err();
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
            k.check(&h, Scope::Read).unwrap_err().code,
            ErrorCode::Unauthenticated
        );
    }

    #[test]
    fn off_when_empty_and_bad_lines_rejected() {
        assert!(
            ApiKeys::parse("")
                .unwrap()
                .check(&HeaderMap::new(), Scope::Write)
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
            .check(&headers("x-api-key", "reader-key-0123456789"), Scope::Admin)
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(
            k.check(&headers("x-api-key", "ops-key-0123456789ab"), Scope::Admin)
                .is_ok()
        );
        assert!(
            !ApiKeys::parse("reader-key-0123456789 read")
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
