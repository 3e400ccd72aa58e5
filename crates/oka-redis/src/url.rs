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

const SENTINEL: [&str; 5] = [
    "sentinelServiceName",
    "sentinelUsername",
    "sentinelPassword",
    "node",
    "layout",
];

/// How the store's data is laid out in Redis (the URL option `layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Oka's own: latest record and bounded history per key (`layout=oka`, the
    /// default).
    #[default]
    Oka,
    /// Volga's hashes, read-only, latest only (`layout=volga`).
    Volga,
    /// Feast's online store hashes, latest only (`layout=feast`; the registry
    /// that names the views comes from `oka serve --feast-repo`).
    Feast,
}

/// A `layout` option with a value other than `oka`, `volga` or `feast`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`layout={0}`: the layouts are `oka` (the default: Oka's own), `volga` (Volga's hot-feature hashes, read-only) and `feast` (Feast's online store, with `oka serve --feast-repo`){1}"
)]
pub struct UnknownLayout(pub String, pub String);

/// The URL's `layout` option, and the URL without it (for the driver).
pub fn take_layout(url: &str) -> Result<(String, Layout), UnknownLayout> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Layout::Oka));
    };
    let mut layout = Layout::Oka;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("layout", "oka")) => layout = Layout::Oka,
            Some(("layout", "volga")) => layout = Layout::Volga,
            Some(("layout", "feast")) => layout = Layout::Feast,
            Some(("layout", other)) => {
                return Err(UnknownLayout(
                    other.to_owned(),
                    did_you_mean(other, ["oka", "volga", "feast"]),
                ));
            }
            None if pair == "layout" => return Err(UnknownLayout(String::new(), String::new())),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, layout))
}

/// Checks the query options of a Redis URL against what its scheme takes:
/// `layout` everywhere; `node` for clusters; `sentinelServiceName`,
/// `sentinelUsername`, `sentinelPassword` and `node` for sentinels (a plain
/// `redis://` URL with `sentinelServiceName` is a sentinel one).
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
        &["node", "layout"]
    } else if scheme.ends_with("-sentinel") || names.contains(&"sentinelServiceName") {
        &SENTINEL
    } else {
        &["sentinelServiceName", "layout"]
    };
    match names.iter().find(|n| !known.contains(n)) {
        None => Ok(()),
        Some(option) => Err(UnknownOption {
            option: (*option).to_owned(),
            scheme: scheme.to_owned(),
            takes: match known {
                [only, _] if *only == "node" => {
                    "only `node` (another cluster node, host:port) and `layout` (`oka`, `volga` or `feast`)"
                        .to_owned()
                }
                [_, _] => "only `layout` (`oka`, `volga` or `feast`); `sentinelServiceName` makes it a sentinel URL".to_owned(),
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
    fn feasts_layout_is_named_feast() {
        assert_eq!(
            take_layout("redis://h:1?layout=feast").unwrap(),
            ("redis://h:1".to_owned(), Layout::Feast)
        );
        let e = take_layout("redis://h:1?layout=feats")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`feast`"), "{e}");
    }

    #[test]
    fn the_layout_option_is_taken_out_of_the_url() {
        assert_eq!(
            take_layout("redis://h:1/2?layout=volga").unwrap(),
            ("redis://h:1/2".to_owned(), Layout::Volga)
        );
        assert_eq!(
            take_layout("redis-cluster://a:1?node=b:2&layout=oka&node=c:3").unwrap(),
            (
                "redis-cluster://a:1?node=b:2&node=c:3".to_owned(),
                Layout::Oka
            )
        );
        assert_eq!(take_layout("redis://h").unwrap().1, Layout::Oka);
        assert_eq!(
            take_layout("redis://h?layout=volgaa")
                .unwrap_err()
                .to_string(),
            "`layout=volgaa`: the layouts are `oka` (the default: Oka's own), `volga` (Volga's hot-feature hashes, read-only) and `feast` (Feast's online store, with `oka serve --feast-repo`) (did you mean `volga`?)"
        );
    }

    #[test]
    fn known_options_pass_and_unknown_ones_are_named() {
        for ok in [
            "redis://127.0.0.1:6379",
            "redis://h:1/2",
            "redis-cluster://a:1?node=b:2&node=c:3",
            "rediss-sentinel://a:26379/0?sentinelServiceName=m&node=b:26379",
            "redis://a:26379?sentinelServiceName=m&sentinelPassword=p",
            "redis://h:1/0?layout=volga",
            "redis-cluster://a:1?layout=volga&node=b:2",
        ] {
            assert_eq!(check_options(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_options("redis://host:6379?layuot=x")
                .unwrap_err()
                .to_string(),
            "unknown option `layuot`: redis:// takes only `layout` (`oka`, `volga` or `feast`); `sentinelServiceName` makes it a sentinel URL (did you mean `layout`?)"
        );
        assert_eq!(
            check_options("redis-cluster://a:1?nod=b:2")
                .unwrap_err()
                .to_string(),
            "unknown option `nod`: redis-cluster:// takes only `node` (another cluster node, host:port) and `layout` (`oka`, `volga` or `feast`) (did you mean `node`?)"
        );
        assert_eq!(
            check_options("redis-sentinel://a:1?sentinelServicename=m")
                .unwrap_err()
                .to_string(),
            "unknown option `sentinelServicename`: redis-sentinel:// takes only `sentinelServiceName`, `sentinelUsername`, `sentinelPassword`, `node`, `layout` (did you mean `sentinelServiceName`?)"
        );
    }
}
