//! A feature repository's `feature_store.yaml`: the settings Oka reads, and a
//! refusal naming the setting for each one it cannot honour.
//!
//! Read: `project`, `registry` (a path, or `{path, registry_type: file}`),
//! `online_store` (`type: redis`: `connection_string`, `redis_type` `redis` or
//! `redis_cluster`, `key_ttl_seconds`) and `entity_key_serialization_version` (3).
//! Everything else (`provider`, `offline_store`, `batch_engine`, `auth`, …) is
//! Feast's own business and ignored.

use std::path::{Path, PathBuf};

use serde_yaml_ng::Value as Yaml;

/// The entity key serialization Oka reads and writes.
pub const SERIALIZATION_VERSION: i64 = 3;

oka_core::described_error! {
    /// Why a feature repository cannot be served: the file, the setting, what is
    /// supported and what to do.
    pub struct RepoError;
}

/// What Oka takes from `feature_store.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeastConfig {
    /// The project: the suffix of every Redis key, and the registry's filter.
    pub project: String,
    /// The file registry, resolved against the repository.
    pub registry: PathBuf,
    /// The Redis online store.
    pub redis: RedisConfig,
}

/// Feast's Redis online store settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// The store as an Oka URL (`redis://…`, `rediss://…`, `redis-cluster://…`),
    /// without `layout` (the caller adds `layout=feast`).
    pub url: String,
    /// Feast's `key_ttl_seconds`: every write sets this expiry on the entity's hash.
    pub key_ttl_seconds: Option<u64>,
}

/// `text` with `$NAME` and `${NAME}` replaced by `var(NAME)`, as Feast reads
/// `feature_store.yaml` (Python's `os.path.expandvars`): a variable that is not
/// set is left as written.
pub fn expand_vars(text: &str, var: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let (name, len) = match tail.strip_prefix('{') {
            Some(braced) => match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => ("", 0),
            },
            None => {
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                (&tail[..end], end)
            }
        };
        match (!name.is_empty()).then(|| var(name)).flatten() {
            Some(value) => {
                out.push_str(&value);
                rest = &tail[len..];
            }
            None => {
                out.push('$');
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

impl FeastConfig {
    /// Reads `<repo>/feature_store.yaml`.
    pub fn load(repo: &Path) -> Result<Self, RepoError> {
        let file = repo.join("feature_store.yaml");
        let text = std::fs::read_to_string(&file).map_err(|e| {
            let why = format!(
                "{}: cannot be read ({}); --feast-repo names the directory holding a Feast feature repository's feature_store.yaml",
                file.display(),
                io_words(&e)
            );
            RepoError::caused(why, e)
        })?;
        let text = expand_vars(&text, |name| std::env::var(name).ok());
        Self::parse(&text, repo, &file.display().to_string())
    }

    /// Parses the text of a `feature_store.yaml` found in `repo` (`file` names it
    /// in messages).
    pub fn parse(text: &str, repo: &Path, file: &str) -> Result<Self, RepoError> {
        let doc: Yaml = serde_yaml_ng::from_str(text)
            .map_err(|e| RepoError::caused(format!("{file}: not valid YAML ({e})"), e))?;
        let at =
            |setting: &str, what: String| RepoError::new(format!("{file}: `{setting}`: {what}"));
        let project = match doc.get("project") {
            Some(Yaml::String(p)) if !p.is_empty() => p.clone(),
            _ => {
                return Err(at(
                    "project",
                    "missing or not a string; Feast requires it".to_owned(),
                ));
            }
        };
        let version = match doc.get("entity_key_serialization_version") {
            None => SERIALIZATION_VERSION,
            Some(v) => v.as_i64().ok_or_else(|| {
                at(
                    "entity_key_serialization_version",
                    "not a whole number".to_owned(),
                )
            })?,
        };
        if version != SERIALIZATION_VERSION {
            return Err(at(
                "entity_key_serialization_version",
                format!(
                    "{version} is not supported: Oka reads and writes version 3 only (Feast's default; Feast's guide \"entity reserialization from v2 to v3\" migrates older data)"
                ),
            ));
        }
        let registry = registry_path(doc.get("registry"), repo, &at)?;
        let redis = redis_config(doc.get("online_store"), &at)?;
        Ok(Self {
            project,
            registry,
            redis,
        })
    }
}

fn registry_path(
    setting: Option<&Yaml>,
    repo: &Path,
    at: &dyn Fn(&str, String) -> RepoError,
) -> Result<PathBuf, RepoError> {
    let path = match setting {
        None => "data/registry.db".to_owned(),
        Some(Yaml::String(p)) => p.clone(),
        Some(Yaml::Mapping(m)) => {
            let kind = m
                .get("registry_type")
                .and_then(Yaml::as_str)
                .unwrap_or("file");
            if kind != "file" {
                return Err(at(
                    "registry.registry_type",
                    format!(
                        "`{kind}` is not supported: Oka reads a file registry (`registry_type: file`, a local path); run `feast apply` with a file registry, or copy the registry file next to Oka"
                    ),
                ));
            }
            m.get("path")
                .and_then(Yaml::as_str)
                .ok_or_else(|| at("registry.path", "missing or not a string".to_owned()))?
                .to_owned()
        }
        Some(_) => {
            return Err(at(
                "registry",
                "neither a path nor a mapping with `path`".to_owned(),
            ));
        }
    };
    if let Some((scheme, _)) = path.split_once("://")
        && scheme != "file"
    {
        return Err(at(
            "registry",
            format!(
                "`{path}`: a `{scheme}://` registry is not supported: Oka reads a local file registry (copy `registry.db` next to Oka, e.g. with `aws s3 cp`, and name its path)"
            ),
        ));
    }
    let path = path.strip_prefix("file://").unwrap_or(&path);
    let path = Path::new(path);
    Ok(if path.is_absolute() {
        path.to_owned()
    } else {
        repo.join(path)
    })
}

fn redis_config(
    setting: Option<&Yaml>,
    at: &dyn Fn(&str, String) -> RepoError,
) -> Result<RedisConfig, RepoError> {
    let Some(Yaml::Mapping(m)) = setting else {
        return Err(at(
            "online_store",
            "missing: Feast's default online store is SQLite, which Oka does not read; Oka serves a Redis online store (`online_store: {type: redis, connection_string: \"host:6379\"}`)".to_owned(),
        ));
    };
    let kind = m.get("type").and_then(Yaml::as_str).unwrap_or("sqlite");
    if kind != "redis" {
        return Err(at(
            "online_store.type",
            format!(
                "`{kind}` is not supported: Oka serves Feast's Redis online store (`type: redis`)"
            ),
        ));
    }
    let cluster = match m
        .get("redis_type")
        .and_then(Yaml::as_str)
        .unwrap_or("redis")
    {
        "redis" => false,
        "redis_cluster" => true,
        other => {
            return Err(at(
                "online_store.redis_type",
                format!(
                    "`{other}` is not supported: Oka reads `redis` and `redis_cluster` (a Sentinel deployment can be given to `oka serve --store` as a `redis-sentinel://` URL instead)"
                ),
            ));
        }
    };
    let connection = m
        .get("connection_string")
        .and_then(Yaml::as_str)
        .unwrap_or("localhost:6379");
    let url = redis_url(connection, cluster)
        .map_err(|what| at("online_store.connection_string", what.message().to_owned()))?;
    let key_ttl_seconds = match m.get("key_ttl_seconds") {
        None | Some(Yaml::Null) => None,
        Some(v) => Some(v.as_u64().filter(|&s| s > 0).ok_or_else(|| {
            at(
                "online_store.key_ttl_seconds",
                "not a positive whole number of seconds".to_owned(),
            )
        })?),
    };
    Ok(RedisConfig {
        url,
        key_ttl_seconds,
    })
}

/// Feast's connection string (`host:port[,host:port…][,db=N][,password=P]
/// [,username=U][,ssl=true]`) as an Oka Redis URL.
pub fn redis_url(connection: &str, cluster: bool) -> Result<String, RepoError> {
    redis_url_parts(connection, cluster)
}

fn redis_url_parts(connection: &str, cluster: bool) -> Result<String, RepoError> {
    let mut hosts = Vec::new();
    let (mut db, mut password, mut username, mut ssl) = (None, None, None, false);
    for part in connection
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        match part.split_once('=') {
            None => hosts.push(part.to_owned()),
            Some(("db", n)) => {
                db =
                    Some(n.parse::<u32>().map_err(|_| {
                        RepoError::new(format!("`db={n}` is not a database number"))
                    })?)
            }
            Some(("password", p)) => password = Some(p.to_owned()),
            Some(("username", u)) => username = Some(u.to_owned()),
            Some(("ssl", v)) => {
                ssl = matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes")
            }
            Some((other, _)) => {
                return Err(RepoError::new(format!(
                    "`{other}` is not an option Oka reads (it reads host:port, `db`, `username`, `password` and `ssl`)"
                )));
            }
        }
    }
    if hosts.is_empty() {
        return Err(RepoError::new(format!("`{connection}` names no host:port")));
    }
    if !cluster && hosts.len() > 1 {
        return Err(RepoError::new(format!(
            "`{connection}` names {} hosts; with `redis_type: redis` give one (several are a cluster: `redis_type: redis_cluster`)",
            hosts.len()
        )));
    }
    let scheme = match (cluster, ssl) {
        (false, false) => "redis",
        (false, true) => "rediss",
        (true, false) => "redis-cluster",
        (true, true) => "rediss-cluster",
    };
    let auth = match (&username, &password) {
        (None, None) => String::new(),
        (u, p) => format!(
            "{}:{}@",
            encode(u.as_deref().unwrap_or("")),
            encode(p.as_deref().unwrap_or(""))
        ),
    };
    let mut url = format!("{scheme}://{auth}{}", hosts[0]);
    if let Some(db) = db {
        if cluster {
            return Err(RepoError::new(
                "`db` cannot be chosen on a Redis Cluster (it has database 0 only)".to_owned(),
            ));
        }
        url.push_str(&format!("/{db}"));
    }
    for (i, node) in hosts.iter().enumerate().skip(1) {
        url.push(if i == 1 { '?' } else { '&' });
        url.push_str("node=");
        url.push_str(node);
    }
    Ok(url)
}

/// Percent-encodes what a URL's user information cannot hold as is.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An I/O error in words for a person (no OS error number).
pub(crate) fn io_words(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file",
        std::io::ErrorKind::PermissionDenied => "permission denied",
        std::io::ErrorKind::IsADirectory => "it is a directory",
        std::io::ErrorKind::InvalidData => "not UTF-8 text",
        _ => "an I/O error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_expanded_as_feast_expands_them() {
        let var = |n: &str| (n == "PORT").then(|| "6380".to_owned());
        assert_eq!(
            expand_vars("a: \"h:${PORT}\" b: $PORT/$NOPE ${NOPE} $ ${", var),
            "a: \"h:6380\" b: 6380/$NOPE ${NOPE} $ ${"
        );
    }

    fn parse(text: &str) -> Result<FeastConfig, RepoError> {
        FeastConfig::parse(text, Path::new("/repo"), "feature_store.yaml")
    }

    #[test]
    fn reads_a_redis_repository() {
        let c = parse(
            "project: p\nprovider: local\nregistry: data/registry.db\nonline_store:\n  type: redis\n  connection_string: \"r:6380,db=2,password=a b\"\n  key_ttl_seconds: 60\noffline_store: {type: file}\nentity_key_serialization_version: 3\n",
        )
        .unwrap();
        assert_eq!(c.project, "p");
        assert_eq!(c.registry, Path::new("/repo/data/registry.db"));
        assert_eq!(c.redis.url, "redis://:a%20b@r:6380/2");
        assert_eq!(c.redis.key_ttl_seconds, Some(60));
    }

    #[test]
    fn a_cluster_and_tls() {
        assert_eq!(
            redis_url("a:1,b:2,c:3,ssl=true", true).unwrap(),
            "rediss-cluster://a:1?node=b:2&node=c:3"
        );
        assert!(
            redis_url("a:1,b:2", false)
                .unwrap_err()
                .message()
                .to_owned()
                .contains("redis_cluster")
        );
        assert!(
            redis_url("a:1,foo=1", false)
                .unwrap_err()
                .message()
                .to_owned()
                .contains("`foo`")
        );
    }

    #[test]
    fn settings_oka_cannot_honour_are_named() {
        for (text, setting) in [
            (
                "project: p\nonline_store: {type: sqlite}\n",
                "online_store.type",
            ),
            ("project: p\n", "online_store"),
            (
                "project: p\nregistry: s3://b/registry.db\nonline_store: {type: redis}\n",
                "registry",
            ),
            (
                "project: p\nregistry: {registry_type: sql, path: 'postgresql://x'}\nonline_store: {type: redis}\n",
                "registry.registry_type",
            ),
            (
                "project: p\nonline_store: {type: redis}\nentity_key_serialization_version: 2\n",
                "entity_key_serialization_version",
            ),
            (
                "project: p\nonline_store: {type: redis, redis_type: redis_sentinel}\n",
                "online_store.redis_type",
            ),
            ("online_store: {type: redis}\n", "project"),
        ] {
            let e = parse(text).unwrap_err().message().to_owned();
            assert!(e.contains(&format!("`{setting}`")), "{setting}: {e}");
        }
    }
}
