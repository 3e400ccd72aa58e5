//! Store URLs, replication settings and the CQL schema.
//!
//! One table holds every pipeline feature:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS oka.features (
//!     feature    text,     -- the feature's name
//!     entity_key text,     -- the canonical entity key (`|`-joined, escaped)
//!     event_time bigint,   -- microseconds since the Unix epoch
//!     record     blob,     -- oka_storage::codec (versioned MessagePack)
//!     PRIMARY KEY ((feature, entity_key), event_time)
//! ) WITH CLUSTERING ORDER BY (event_time DESC);
//! ```
//!
//! A partition is one (feature, key): reads touch one partition each, and a popular
//! feature spreads over the whole ring (never one partition per feature). Newest
//! first, so `latest` is `LIMIT 1` and `last_n` is `LIMIT n`.

use std::fmt;

/// A parsed `scylla://` (or `cassandra://`) URL:
/// `scylla://[user[:password]@]host[:port][,host[:port]…][/keyspace]`.
#[derive(Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// Contact points, `host:port` (port 9042 when not given).
    pub nodes: Vec<String>,
    /// The keyspace (default `oka`).
    pub keyspace: String,
    /// Credentials for PasswordAuthenticator.
    pub credentials: Option<(String, String)>,
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreUrl")
            .field("nodes", &self.nodes)
            .field("keyspace", &self.keyspace)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .finish()
    }
}

/// The URL schemes this backend accepts.
pub const SCHEMES: &[&str] = &["scylla", "cassandra"];

/// The keyspace when the URL names none.
pub const DEFAULT_KEYSPACE: &str = "oka";

/// The table every feature lives in.
pub const TABLE: &str = "features";

/// Whether `name` is a valid unquoted CQL keyspace name (so it can be spliced into
/// statements as is).
fn valid_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 48
}

/// Why a CQL store URL was refused. Messages never show a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// No `scheme://`.
    #[error("`{0}` is not a URL")]
    NotAUrl(String),
    /// A scheme other than `scylla` or `cassandra`.
    #[error("invalid CQL store scheme `{0}`: expected scylla:// or cassandra://")]
    Scheme(String),
    /// A query option: the CQL store's settings are flags, not URL options.
    #[error("unknown option `{option}`: {scheme}:// URLs take no options; {hint}")]
    Option {
        /// The URL's scheme.
        scheme: String,
        /// The first option, as written.
        option: String,
        /// Where the setting goes instead.
        hint: String,
    },
    /// A `#fragment`.
    #[error("a {0}:// URL takes no `#…` fragment")]
    Fragment(String),
    /// `:password@` without a user.
    #[error("the URL has credentials without a user name")]
    NoUser,
    /// `a,,b` or nothing between `//` and `/`.
    #[error("`{0}` has an empty host")]
    EmptyHost(String),
    /// A port that is not a number from 0 to 65535.
    #[error("`{host}`: invalid port `{port}`")]
    Port {
        /// The host as written.
        host: String,
        /// The port as written.
        port: String,
    },
    /// A keyspace that is not a plain CQL identifier.
    #[error("invalid keyspace `{0}`: a letter, then letters, digits or `_`, at most 48")]
    Keyspace(String),
}

impl StoreUrl {
    /// Parses a store URL.
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| UrlError::NotAUrl(redact(url)))?;
        if !SCHEMES.contains(&scheme) {
            return Err(UrlError::Scheme(scheme.to_owned()));
        }
        if rest.contains('#') {
            return Err(UrlError::Fragment(scheme.to_owned()));
        }
        let rest = match rest.split_once('?') {
            Some((rest, "")) => rest,
            Some((_, query)) => {
                let option = query.split('&').find(|o| !o.is_empty()).unwrap_or(query);
                let option = option.split_once('=').map_or(option, |(k, _)| k);
                return Err(UrlError::Option {
                    scheme: scheme.to_owned(),
                    option: option.to_owned(),
                    hint: option_hint(scheme, option),
                });
            }
            None => rest,
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((creds, hosts)) => {
                let (user, password) = creds.split_once(':').unwrap_or((creds, ""));
                if user.is_empty() {
                    return Err(UrlError::NoUser);
                }
                (Some((user.to_owned(), password.to_owned())), hosts)
            }
            None => (None, authority),
        };
        let mut nodes = Vec::new();
        for host in hosts.split(',') {
            if host.is_empty() {
                return Err(UrlError::EmptyHost(redact(url)));
            }
            // `[v6]:port`, `[v6]`, `host:port`, `host`.
            let has_port = match host.rfind(']') {
                Some(close) => host[close..].contains(':'),
                None => host.contains(':'),
            };
            if has_port {
                let (_, port) = host.rsplit_once(':').unwrap_or_default();
                if port.parse::<u16>().is_err() {
                    return Err(UrlError::Port {
                        host: host.to_owned(),
                        port: port.to_owned(),
                    });
                }
                nodes.push(host.to_owned());
            } else {
                nodes.push(format!("{host}:9042"));
            }
        }
        let keyspace = match path.trim_end_matches('/') {
            "" => DEFAULT_KEYSPACE.to_owned(),
            ks if valid_identifier(ks) => ks.to_owned(),
            ks => return Err(UrlError::Keyspace(ks.to_owned())),
        };
        Ok(Self {
            nodes,
            keyspace,
            credentials,
        })
    }
}

/// The `--store-*` flags that hold the CQL store's settings.
const FLAGS: [&str; 11] = [
    "read-consistency",
    "write-consistency",
    "local-dc",
    "replication",
    "create-schema",
    "timeout-ms",
    "connect-timeout-ms",
    "pool-size",
    "speculative-ms",
    "read-concurrency",
    "write-concurrency",
];

/// Where the setting a URL option names goes instead: the flags whose names
/// hold it (`consistency`, `localDc`, `local_dc`, `timeout`, …), else the list.
fn option_hint(scheme: &str, option: &str) -> String {
    let plain = |s: &str| s.to_lowercase().replace(['-', '_'], "");
    let wanted = plain(option);
    match wanted.as_str() {
        "keyspace" => {
            return format!("give the keyspace as the path: {scheme}://host:9042/KEYSPACE");
        }
        "user" | "username" | "password" => {
            return format!("give credentials before the host: {scheme}://USER:PASSWORD@host");
        }
        _ => {}
    }
    let flags: Vec<String> = FLAGS
        .iter()
        .filter(|f| {
            let f = plain(f);
            wanted.len() >= 2 && (f.contains(&wanted) || wanted.contains(&f))
        })
        .map(|f| format!("--store-{f}"))
        .collect();
    if flags.is_empty() {
        "the settings are flags: --store-read-consistency, --store-write-consistency, --store-local-dc, --store-replication, … (see `oka serve --help`)".into()
    } else {
        format!("give it as a flag: {}", flags.join(" or "))
    }
}

/// `url` with the password replaced, for logs and errors.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => match url[s + 3..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
            None => url.to_owned(),
        },
        _ => url.to_owned(),
    }
}

/// The keyspace's replication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// `SimpleStrategy` with this replication factor (one data center; tests, dev).
    Simple(u32),
    /// `NetworkTopologyStrategy`: replication factor per data center (production:
    /// 3 per DC).
    NetworkTopology(Vec<(String, u32)>),
}

impl Default for Replication {
    fn default() -> Self {
        Self::Simple(1)
    }
}

/// Why a `--store-replication` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// Not a number from 1 to 32.
    #[error("invalid replication factor `{0}` (1..=32)")]
    Factor(String),
    /// Neither `simple:RF` nor `DC:RF[,DC:RF…]`.
    #[error("invalid replication `{0}`: expected `simple:RF` or `DC:RF[,DC:RF…]`")]
    Shape(String),
    /// A data center name with characters CQL would not take.
    #[error("invalid data center name `{0}`")]
    DataCenter(String),
    /// The same data center twice.
    #[error("data center `{0}` given twice")]
    Repeated(String),
}

impl Replication {
    /// Parses `simple:RF` or `DC:RF[,DC:RF…]` (NetworkTopologyStrategy).
    pub fn parse(s: &str) -> Result<Self, ReplicationError> {
        let rf = |v: &str| match v.trim().parse::<u32>() {
            Ok(n) if (1..=32).contains(&n) => Ok(n),
            _ => Err(ReplicationError::Factor(v.to_owned())),
        };
        let s = s.trim();
        if let Some(n) = s
            .strip_prefix("simple:")
            .or_else(|| s.strip_prefix("SimpleStrategy:"))
        {
            return Ok(Self::Simple(rf(n)?));
        }
        let mut dcs = Vec::new();
        for part in s.split(',') {
            let (dc, n) = part
                .split_once(':')
                .ok_or_else(|| ReplicationError::Shape(s.to_owned()))?;
            let dc = dc.trim();
            if dc.is_empty()
                || !dc
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            {
                return Err(ReplicationError::DataCenter(dc.to_owned()));
            }
            if dcs.iter().any(|(d, _)| d == dc) {
                return Err(ReplicationError::Repeated(dc.to_owned()));
            }
            dcs.push((dc.to_owned(), rf(n)?));
        }
        Ok(Self::NetworkTopology(dcs))
    }

    /// The CQL replication map.
    pub fn cql(&self) -> String {
        match self {
            Self::Simple(rf) => {
                format!("{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
            }
            Self::NetworkTopology(dcs) => {
                let mut out = "{'class': 'NetworkTopologyStrategy'".to_owned();
                for (dc, rf) in dcs {
                    out.push_str(&format!(", '{dc}': {rf}"));
                }
                out.push('}');
                out
            }
        }
    }
}

/// The DDL that creates the keyspace and the table, one statement per entry.
pub fn ddl(keyspace: &str, replication: &Replication) -> Vec<String> {
    vec![
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {} AND durable_writes = true",
            replication.cql()
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.{TABLE} (\n    \
             feature text,\n    \
             entity_key text,\n    \
             event_time bigint,\n    \
             record blob,\n    \
             PRIMARY KEY ((feature, entity_key), event_time)\n\
             ) WITH CLUSTERING ORDER BY (event_time DESC)\n    \
             AND compaction = {{'class': 'LeveledCompactionStrategy'}}\n    \
             AND caching = {{'keys': 'ALL', 'rows_per_partition': '1'}}\n    \
             AND comment = 'Oka pipeline features: a partition per (feature, entity key), newest first'"
        ),
    ]
}

/// The DDL as a CQL script (what `oka schema` prints).
pub fn ddl_script(keyspace: &str, replication: &Replication) -> String {
    let mut out = String::new();
    for stmt in ddl(keyspace, replication) {
        out.push_str(&stmt);
        out.push_str(";\n\n");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let u = StoreUrl::parse("scylla://127.0.0.1:9042/feats").unwrap();
        assert_eq!(u.nodes, ["127.0.0.1:9042"]);
        assert_eq!(u.keyspace, "feats");
        assert_eq!(u.credentials, None);
        let u = StoreUrl::parse("cassandra://u:p@a,b:9142,[::1]:9000,[::1]").unwrap();
        assert_eq!(u.nodes, ["a:9042", "b:9142", "[::1]:9000", "[::1]:9042"]);
        assert_eq!(u.keyspace, "oka");
        assert_eq!(u.credentials, Some(("u".into(), "p".into())));
        for bad in [
            "redis://x",
            "scylla://",
            "scylla://a,,b",
            "scylla://a:x",
            "scylla://a/1ks",
            "scylla://a/k-s",
            "scylla://a/ks?consistency=one",
            "scylla://:p@a",
        ] {
            assert!(StoreUrl::parse(bad).is_err(), "{bad}");
        }
        for (url, message) in [
            (
                "scylla://a/ks?consistency=one",
                "unknown option `consistency`: scylla:// URLs take no options; give it as a flag: --store-read-consistency or --store-write-consistency",
            ),
            (
                "cassandra://a/ks?x=1&localDc=eu",
                "unknown option `x`: cassandra:// URLs take no options; the settings are flags: --store-read-consistency, --store-write-consistency, --store-local-dc, --store-replication, … (see `oka serve --help`)",
            ),
            (
                "scylla://a?local_dc=eu",
                "unknown option `local_dc`: scylla:// URLs take no options; give it as a flag: --store-local-dc",
            ),
            (
                "scylla://a?keyspace=ks",
                "unknown option `keyspace`: scylla:// URLs take no options; give the keyspace as the path: scylla://host:9042/KEYSPACE",
            ),
            ("scylla://a/ks#x", "a scylla:// URL takes no `#…` fragment"),
        ] {
            assert_eq!(
                StoreUrl::parse(url).unwrap_err().to_string(),
                message,
                "{url}"
            );
        }
        assert_eq!(StoreUrl::parse("scylla://a/ks?").unwrap().keyspace, "ks");
        let debug = format!("{:?}", StoreUrl::parse("scylla://u:secret@a").unwrap());
        assert!(!debug.contains("secret"), "{debug}");
        assert_eq!(redact("scylla://u:secret@a/ks"), "scylla://u:***@a/ks");
    }

    #[test]
    fn replication_parses_and_renders() {
        assert_eq!(
            Replication::parse("simple:3").unwrap(),
            Replication::Simple(3)
        );
        let nts = Replication::parse("dc1:3, eu-west-1:2").unwrap();
        assert_eq!(
            nts.cql(),
            "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'eu-west-1': 2}"
        );
        for bad in ["", "simple:0", "simple:x", "dc1", "dc1:3,dc1:3", "d'c:1"] {
            assert!(Replication::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ddl_names_the_keyspace_and_partitions_by_feature_and_key() {
        let script = ddl_script("oka", &Replication::Simple(1));
        assert!(script.contains("CREATE KEYSPACE IF NOT EXISTS oka WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"));
        assert!(script.contains("PRIMARY KEY ((feature, entity_key), event_time)"));
        assert!(script.contains("CLUSTERING ORDER BY (event_time DESC)"));
    }
}
