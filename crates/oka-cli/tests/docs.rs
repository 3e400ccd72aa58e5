//! The ingest examples of `docs/feature-spec.md` ("Ingest input format") go
//! through `oka ingest` as they are: every record written, none rejected.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{OKA, tmp_file};

const DOC: &str = include_str!("../../../docs/feature-spec.md");

/// The fenced blocks of `lang` in `text`, in order.
fn blocks<'d>(text: &'d str, lang: &str) -> Vec<&'d str> {
    let open = format!("```{lang}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(&open) {
        let body = &rest[i + open.len()..];
        let Some(end) = body.find("\n```") else { break };
        out.push(&body[..=end]);
        rest = &body[end + 4..];
    }
    out
}

#[test]
fn the_ingest_examples_are_accepted_record_for_record() {
    let start = DOC.find("## Ingest input format").expect("the section");
    let section = &DOC[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let spec = tmp_file("docs-clicks.yaml", blocks(section, "yaml")[0]);
    let mut checked = 0;
    for (lang, ext) in [("jsonl", "jsonl"), ("csv", "csv")] {
        for (i, block) in blocks(section, lang).into_iter().enumerate() {
            let records =
                block.lines().filter(|l| !l.trim().is_empty()).count() - usize::from(lang == "csv");
            let file = tmp_file(&format!("docs-{i}.{ext}"), block);
            let out = Command::new(OKA)
                .args([
                    "ingest",
                    "--store",
                    "memory://",
                    "--feature",
                    "clicks",
                    "--spec",
                ])
                .arg(&spec)
                .arg("--file")
                .arg(&file)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "{lang} example {i}:\n{stdout}{stderr}"
            );
            assert!(
                stdout.contains(&format!("wrote {records} records"))
                    && stdout.contains("rejected 0"),
                "{lang} example {i}:\n{stdout}{stderr}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2, "one JSON Lines and one CSV example");
}
