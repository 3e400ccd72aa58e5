//! The spec examples of `docs/feature-spec.md` load: every ```yaml block with a
//! `version: 1` line is a whole spec, loaded as a user's would be.

use oka_core::{NativeUdfs, Registry};

const DOC: &str = include_str!("../../../../docs/feature-spec.md");

/// The fenced blocks of `lang` in `doc`, in order.
pub fn blocks<'d>(doc: &'d str, lang: &str) -> Vec<&'d str> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find(&open) {
        let body = &rest[i + open.len()..];
        let Some(end) = body.find("\n```") else { break };
        out.push(&body[..=end]);
        rest = &body[end + 4..];
    }
    out
}

#[test]
fn every_whole_spec_in_the_reference_loads() {
    let specs: Vec<&str> = blocks(DOC, "yaml")
        .into_iter()
        .filter(|b| b.lines().any(|l| l == "version: 1") && !b.starts_with("# bad"))
        .collect();
    for (i, spec) in specs.iter().enumerate() {
        if let Err(e) = Registry::from_yaml(
            &format!("feature-spec.md example {i}"),
            spec,
            &NativeUdfs::new(),
        ) {
            panic!("{e}\n--- the example:\n{spec}");
        }
    }
    // The demo spec, `output`, `aggregate` and the CEL aggregation functions.
    assert!(specs.len() >= 4, "only {} whole specs found", specs.len());
    let aggregate = specs
        .iter()
        .find(|s| s.contains("amount_stats_1h:"))
        .expect("the aggregate example");
    let r = Registry::from_yaml("example", aggregate, &NativeUdfs::new()).unwrap();
    let f = r.feature(r.feature_id("amount_stats_1h").unwrap());
    let types: Vec<String> = f
        .entity
        .columns
        .iter()
        .map(|c| format!("{}: {}", c.name, c.ty))
        .collect();
    assert_eq!(
        types,
        [
            "user_id: string",
            "ts: timestamp",
            "n: int",
            "total: float",
            "mean: float",
            "p90: float",
            "spread: float",
            "items: int",
            "last_seen: timestamp",
            "last_merchant: string",
            "decayed: float"
        ]
    );
}

/// The bad spec of "`oka validate`: bad specs" gives the messages printed under it.
#[test]
fn the_bad_spec_example_prints_what_the_reference_shows() {
    let section = &DOC[DOC.find("### `oka validate`: bad specs").unwrap()..];
    let spec = blocks(section, "yaml")
        .into_iter()
        .find(|b| b.starts_with("# bad.yaml"))
        .expect("the bad spec");
    let shown: Vec<&str> = blocks(section, "console")[0]
        .lines()
        .skip_while(|l| !l.starts_with("$ oka validate --spec bad.yaml"))
        .skip(1)
        .take_while(|l| !l.starts_with('$'))
        .collect();
    let got = match Registry::from_yaml("bad.yaml", spec, &NativeUdfs::new()) {
        Ok(_) => panic!("the bad spec loads"),
        Err(e) => e.to_string(),
    };
    assert_eq!(got.lines().collect::<Vec<_>>(), shown);
}
