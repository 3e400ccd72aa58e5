//! `oka init` round trip, as its README tells a new user: init, validate, ingest
//! the sample data into Redis, serve, and ask the README's own request. Needs
//! `OKA_TEST_REDIS_URL` (set by `.ci/run`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{OKA, Oka, http, service_url, start_oka};

/// Runs `oka ARGS`; (success, stdout, stderr).
fn oka(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(OKA).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn init_writes_a_project_and_refuses_to_overwrite_it() {
    let dir = std::env::temp_dir().join(format!("oka-init-{}-a", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display().to_string();
    let (ok, stdout, stderr) = oka(&["init", &d]);
    assert!(ok, "{stderr}");
    for f in ["oka.yaml", "README.md", "data/transactions.jsonl"] {
        assert!(dir.join(f).is_file(), "{f} missing");
        assert!(stdout.contains(&format!("wrote {d}/{f}")), "{stdout}");
    }
    let (ok, _, stderr) = oka(&["init", &d]);
    assert!(!ok);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: {d}/oka.yaml already exists; give a new directory, or --force to overwrite the project's files"
        )
    );
    assert!(oka(&["init", &d, "--force"]).0);
    let (ok, stdout, stderr) = oka(&["validate", "--spec", &format!("{d}/oka.yaml")]);
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout.trim_end(),
        format!("{d}/oka.yaml: ok (1 entity, 3 features: 1 pipeline, 2 on-demand)")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The commands and the request of the README, with the README's answers.
#[test]
fn the_readme_of_an_initialised_project_works_against_redis() {
    let Some(url) = service_url("OKA_TEST_REDIS_URL") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("oka-init-{}-b", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.display().to_string();
    assert!(oka(&["init", &d]).0);
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    // Each `oka …` line of the README, run with this test's Redis and a key prefix of
    // its own (so that runs never see each other's data).
    let prefix = format!("oka-init-test-{}:", std::process::id());
    let commands: Vec<Vec<String>> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("oka "))
        .map(|l| {
            l.replace("redis://127.0.0.1:6379", &url)
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .collect();
    assert_eq!(commands.len(), 3, "validate, ingest, serve:\n{readme}");
    for c in &commands[..2] {
        let mut args: Vec<&str> = c.iter().map(String::as_str).collect();
        if args[0] == "ingest" {
            args.extend(["--store-key-prefix", &prefix]);
        }
        let (ok, stdout, stderr) = oka(&args);
        assert!(ok, "oka {args:?}: {stdout}{stderr}");
        if args[0] == "ingest" {
            assert!(stdout.contains("wrote 10 records"), "{stdout}");
        }
    }
    assert_eq!(commands[2][0], "serve");
    let mut serve: Vec<&str> = commands[2][1..].iter().map(String::as_str).collect();
    serve.extend(["--store-key-prefix", &prefix, "--workers", "1"]);
    let Oka {
        server: _server,
        addr,
        ..
    } = start_oka(&serve, None);
    // The README's curl body.
    let body = readme
        .split("-d '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap();
    let (status, answer) = http(addr, "POST", "/v1/features", body).unwrap();
    assert_eq!(status, 200, "{answer}");
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    let spend = &v["results"]["spend_24h"][0][0];
    let profile = &v["results"]["recent_profile"][0][0];
    // The README says: txn_count 6, total 521.75, p90 190.0, large_share 0.5.
    for (said, value) in [
        ("`txn_count` 6", &spend["txn_count"]),
        ("`total` 521.75", &spend["total"]),
        ("`p90` 190.0", &spend["p90"]),
        ("`large_share` of 0.5", &profile["large_share"]),
    ] {
        assert!(readme.contains(said), "the README no longer says {said}");
        let number = said.rsplit(' ').next().unwrap();
        assert_eq!(value.to_string(), number, "{said}: {answer}");
    }
    // The hand-computed rest: u1 spent 12.5, 80, 7.25, 150, 42 and 230.
    assert_eq!(spend["mean"], 521.75 / 6.0);
    assert_eq!(spend["user_id"], "u1");
    assert_eq!(profile["merchants"], 4);
    assert_eq!(v["statuses"]["spend_24h"][0], "present");
    std::fs::remove_dir_all(&dir).unwrap();
}
