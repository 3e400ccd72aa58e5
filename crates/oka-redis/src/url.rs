//! Redis store URLs: the query options each scheme takes, so that a misspelt
//! one is refused instead of silently ignored.

use oka_core::error::did_you_mean;

/// A query option the URL's scheme does not take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown option `{option}`: {scheme}:// takes {takes}{suggestion}")]
pub struct UnknownOption {
    /// The option as written.
    pub option: String,
    /// The URL's scheme.
    pub scheme: String,
    /// The options it takes, in words.
    pub takes: String,
    /// ` (did you mean …?)` or nothing.
    pub suggestion: String,
}

const SENTINEL: [&str; 4] = [
    "sentinelServiceName",
    "sentinelUsername",
    "sentinelPassword",
    "node",
];

/// Checks the query options of a Redis URL against what its scheme takes:
/// `node` for clusters; `sentinelServiceName`, `sentinelUsername`,
/// `sentinelPassword` and `node` for sentinels (a plain `redis://` URL with
/// `sentinelServiceName` is a sentinel one); nothing otherwise.
pub fn check_options(url: &str) -> Result<(), UnknownOption> {
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    let Some((_, query)) = url.split_once('?') else {
        return Ok(());
    };
    let query = query.split('#').next().unwrap_or_default();
    let names: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or(p, |(k, _)| k))
        .collect();
    let known: &[&str] = if scheme.ends_with("-cluster") {
        &["node"]
    } else if scheme.ends_with("-sentinel") || names.contains(&"sentinelServiceName") {
        &SENTINEL
    } else {
        &["sentinelServiceName"]
    };
    match names.iter().find(|n| !known.contains(n)) {
        None => Ok(()),
        Some(option) => Err(UnknownOption {
            option: (*option).to_owned(),
            scheme: scheme.to_owned(),
            takes: match known {
                [only] if *only == "node" => {
                    "only `node` (another cluster node, host:port)".to_owned()
                }
                [_] => "no options (`sentinelServiceName` makes it a sentinel URL)".to_owned(),
                _ => format!(
                    "only {}",
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
            suggestion: did_you_mean(option, known.iter().copied()),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn known_options_pass_and_unknown_ones_are_named() {
        for ok in [
            "redis://127.0.0.1:6379",
            "redis://h:1/2",
            "redis-cluster://a:1?node=b:2&node=c:3",
            "rediss-sentinel://a:26379/0?sentinelServiceName=m&node=b:26379",
            "redis://a:26379?sentinelServiceName=m&sentinelPassword=p",
        ] {
            assert_eq!(check_options(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_options("redis://host:6379?layuot=x")
                .unwrap_err()
                .to_string(),
            "unknown option `layuot`: redis:// takes no options (`sentinelServiceName` makes it a sentinel URL)"
        );
        assert_eq!(
            check_options("redis-cluster://a:1?nod=b:2")
                .unwrap_err()
                .to_string(),
            "unknown option `nod`: redis-cluster:// takes only `node` (another cluster node, host:port) (did you mean `node`?)"
        );
        assert_eq!(
            check_options("redis-sentinel://a:1?sentinelServicename=m")
                .unwrap_err()
                .to_string(),
            "unknown option `sentinelServicename`: redis-sentinel:// takes only `sentinelServiceName`, `sentinelUsername`, `sentinelPassword`, `node` (did you mean `sentinelServiceName`?)"
        );
    }
}
