//! `oka source kafka` end to end, as processes: a real broker
//! (OKA_TEST_KAFKA_BROKERS, e.g. from `.ci/kafka.sh`) and Redis
//! (OKA_TEST_REDIS_URL, or a redis-server a test starts, stops and starts again).
//! Each test has its own topics, group and key prefix. Without the variables the
//! broker tests are skipped with a note, or fail under OKA_REQUIRE_KAFKA=1 /
//! OKA_REQUIRE_REDIS=1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod kafka_support;

use std::process::Command;
use std::time::Duration;

use common::{OKA, http, start_oka, tmp_file};
use kafka_support::{
    Kafka, Redis, missing, services, signal, spec, start_source, start_source_with, unique,
    wait_for,
};

const MINUTE: Duration = Duration::from_secs(60);
const PARTITIONS: i32 = 3;

#[test]
fn every_record_produced_is_served_and_committed() {
    let Some((brokers, redis)) = services() else {
        return;
    };
    let kafka = Kafka { brokers };
    let (topic, group, prefix) = (
        unique("clicks"),
        unique("group"),
        format!("{}:", unique("kt")),
    );
    kafka.create_topic(&topic, PARTITIONS);
    kafka.produce_clicks(&topic, 0, 3000, PARTITIONS);
    let spec = spec(&topic, &group, "");
    let mut source = start_source(&spec, &kafka.brokers, &redis, &prefix);
    source.wait_joined();
    wait_for("3000 records written", 2 * MINUTE, || {
        source.metric("oka_kafka_records_written_total", "") >= 3000.0
    });
    wait_for("every partition's lag at 0", MINUTE, || {
        let lag = |name| source.metric(name, &format!("topic=\"{topic}\""));
        let text = http(source.admin, "GET", "/metrics", "").unwrap().1;
        text.matches("oka_kafka_consumer_lag_records{").count() == 3
            && lag("oka_kafka_consumer_lag_records") == 0.0
            && lag("oka_kafka_consumer_lag_seconds") == 0.0
    });
    assert!(source.metric("oka_kafka_commits_total", "result=\"ok\"") >= 1.0);
    assert!(source.metric("oka_kafka_delivery_seconds_count", "") >= 3000.0);
    assert_eq!(source.metric("oka_ingest_rows_total", "written"), 3000.0);
    let log = source.log.clone();
    let status = source.terminate();
    let log = std::fs::read_to_string(log).unwrap();
    assert!(status.success(), "SIGTERM is a clean stop:\n{log}");
    assert!(log.contains("offsets committed"), "{log}");
    assert_eq!(
        kafka.committed(&group, &topic, PARTITIONS),
        kafka.ends(&topic, PARTITIONS),
        "everything committed"
    );
    assert_eq!(
        missing(&spec, &redis, &prefix, 0..3000),
        Vec::<usize>::new()
    );
}

#[test]
fn a_consumer_killed_with_batches_in_flight_loses_nothing() {
    let Some((brokers, _)) = services() else {
        return;
    };
    let mut redis = Redis::start();
    let kafka = Kafka { brokers };
    let (topic, group, prefix) = (
        unique("clicks"),
        unique("group"),
        format!("{}:", unique("kt")),
    );
    kafka.create_topic(&topic, PARTITIONS);
    kafka.produce_clicks(&topic, 0, 4000, PARTITIONS);
    let spec = spec(&topic, &group, "");
    // Static membership: the consumer restarted under the same name takes its
    // partitions back at once, not after the killed one's session timeout.
    let instance = unique("pod");
    let flags = ["--instance-id", instance.as_str()];
    let mut source = start_source_with(&spec, &kafka.brokers, &redis.url(), &prefix, &flags);
    source.wait_joined();
    wait_for("some records written", 2 * MINUTE, || {
        source.metric("oka_kafka_records_written_total", "") >= 400.0
    });
    // Freeze the store: the batches received now stay in flight.
    signal(redis.child.as_ref().unwrap(), "STOP");
    wait_for("records received and not written", MINUTE, || {
        let consumed = source.metric("oka_kafka_records_consumed_total", "");
        consumed >= source.metric("oka_kafka_records_written_total", "") + 200.0
    });
    let written = source.metric("oka_kafka_records_written_total", "");
    source.child.kill().unwrap();
    source.child.wait().unwrap();
    signal(redis.child.as_ref().unwrap(), "CONT");
    let committed: i64 = kafka
        .committed(&group, &topic, PARTITIONS)
        .iter()
        .map(|o| o.max(&0))
        .sum();
    assert!(
        (committed as f64) <= written && committed < 4000,
        "killed before committing everything received ({committed} committed, {written} written)"
    );
    kafka.produce_clicks(&topic, 4000, 8000, PARTITIONS);
    let restarted = std::time::Instant::now();
    let again = start_source_with(&spec, &kafka.brokers, &redis.url(), &prefix, &flags);
    wait_for("/readyz 200 after the restart", MINUTE, || {
        http(again.admin, "GET", "/readyz", "").is_some_and(|(s, _)| s == 200)
    });
    let took = restarted.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "ready {took:?} after the restart: the group waited for the killed member"
    );
    wait_for("the group to commit every offset", 2 * MINUTE, || {
        kafka.committed(&group, &topic, PARTITIONS) == kafka.ends(&topic, PARTITIONS)
    });
    assert!(again.terminate().success());
    assert_eq!(
        missing(&spec, &redis.url(), &prefix, 0..8000),
        Vec::<usize>::new()
    );
    redis.kill();
}

/// A consumer writing into a Redis of the test's own, its first 1,000 records
/// written and committed.
struct Consuming {
    redis: Redis,
    kafka: Kafka,
    topic: String,
    group: String,
    prefix: String,
    spec: std::path::PathBuf,
    source: kafka_support::Source,
}

fn consuming_into_own_redis() -> Option<Consuming> {
    let (brokers, _) = services()?;
    let redis = Redis::start();
    let kafka = Kafka { brokers };
    let (topic, group, prefix) = (
        unique("clicks"),
        unique("group"),
        format!("{}:", unique("kt")),
    );
    kafka.create_topic(&topic, PARTITIONS);
    kafka.produce_clicks(&topic, 0, 1000, PARTITIONS);
    let spec = spec(&topic, &group, "");
    let mut source = start_source(&spec, &kafka.brokers, &redis.url(), &prefix);
    source.wait_joined();
    wait_for("the first 1000 committed", 2 * MINUTE, || {
        kafka.committed(&group, &topic, PARTITIONS) == kafka.ends(&topic, PARTITIONS)
    });
    Some(Consuming {
        redis,
        kafka,
        topic,
        group,
        prefix,
        spec,
        source,
    })
}

#[test]
fn the_consumer_pauses_while_redis_is_down_and_catches_up() {
    let Some(Consuming {
        mut redis,
        kafka,
        topic,
        group,
        prefix,
        spec,
        source,
    }) = consuming_into_own_redis()
    else {
        return;
    };
    let before = kafka.committed(&group, &topic, PARTITIONS);
    redis.kill();
    kafka.produce_clicks(&topic, 1000, 5000, PARTITIONS);
    wait_for("store retries and a pause", MINUTE, || {
        source.metric("oka_kafka_store_retries_total", "") >= 1.0
            && source.metric("oka_kafka_paused", "") == 1.0
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        kafka.committed(&group, &topic, PARTITIONS),
        before,
        "no commit while the store is down"
    );
    let consumed = source.metric("oka_kafka_records_consumed_total", "");
    assert!(
        consumed < 5000.0,
        "fetching paused: {consumed} of 5000 received while the store is down"
    );
    assert_eq!(source.metric("oka_kafka_records_written_total", ""), 1000.0);
    redis.up();
    wait_for("the group to catch up", 2 * MINUTE, || {
        kafka.committed(&group, &topic, PARTITIONS) == kafka.ends(&topic, PARTITIONS)
    });
    assert_eq!(source.metric("oka_kafka_paused", ""), 0.0);
    assert!(source.terminate().success());
    assert_eq!(
        missing(&spec, &redis.url(), &prefix, 0..5000),
        Vec::<usize>::new()
    );
}

/// Redis starts refusing the consumer's credentials (a password set or rotated
/// under it): it stops retrying at once, says why in one line, exits 1, and
/// commits nothing past the last batch Redis took.
#[test]
fn the_consumer_stops_when_the_store_refuses_its_credentials() {
    let Some(Consuming {
        redis,
        kafka,
        topic,
        group,
        mut source,
        ..
    }) = consuming_into_own_redis()
    else {
        return;
    };
    let before = kafka.committed(&group, &topic, PARTITIONS);
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &redis.port.to_string(), "--no-auth-warning"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(cli(&["config", "set", "requirepass", "rotated"]), "OK");
    cli(&["-a", "rotated", "client", "kill", "type", "normal"]);
    kafka.produce_clicks(&topic, 1000, 2000, PARTITIONS);
    let mut status = None;
    wait_for("the consumer to stop", MINUTE, || {
        status = source.child.try_wait().unwrap();
        status.is_some()
    });
    let log = source.log_text();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{log}");
    let errors: Vec<_> = log.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(
        errors[0].contains("redis refused the credentials")
            && errors[0].contains("check the user and password"),
        "{log}"
    );
    assert_eq!(
        log.matches("the store refused the credentials").count(),
        1,
        "one WARN line: {log}"
    );
    assert!(
        !log.contains("writing it again") && !log.contains("Error {"),
        "{log}"
    );
    assert_eq!(
        kafka.committed(&group, &topic, PARTITIONS),
        before,
        "nothing committed past what the store took"
    );
}

#[test]
fn bad_records_are_counted_dead_lettered_and_do_not_block_their_partition() {
    let Some((brokers, redis)) = services() else {
        return;
    };
    let kafka = Kafka { brokers };
    let (topic, group, prefix) = (
        unique("clicks"),
        unique("group"),
        format!("{}:", unique("kt")),
    );
    let dlq = format!("{topic}.rejected");
    kafka.create_topic(&topic, 1);
    kafka.create_topic(&dlq, 1);
    let good = |from: usize, to: usize| {
        (from..to).map(|i| (0, format!(r#"{{"id":"k{i}","n":{i}}}"#).into_bytes()))
    };
    let bad: [&[u8]; 4] = [
        b"not json",
        br#"{"id":"k-bad","colour":1}"#,
        b"",
        br#"{"n":1}"#,
    ];
    let messages: Vec<(i32, Vec<u8>)> = good(0, 50)
        .chain(bad.iter().map(|b| (0, b.to_vec())))
        .chain(good(50, 100))
        .collect();
    kafka.produce(&topic, &messages);
    let spec = spec(&topic, &group, &format!(", dead_letter_topic: {dlq}"));
    let source = start_source(&spec, &kafka.brokers, &redis, &prefix);
    wait_for("the partition's every offset committed", 2 * MINUTE, || {
        kafka.committed(&group, &topic, 1) == [104]
    });
    for reason in ["not_json", "unknown_field", "empty", "missing_key"] {
        let n = source.metric(
            "oka_kafka_records_rejected_total",
            &format!("reason=\"{reason}\""),
        );
        assert_eq!(n, 1.0, "{reason}");
    }
    assert_eq!(
        source.metric("oka_kafka_records_dead_lettered_total", ""),
        4.0
    );
    assert_eq!(source.metric("oka_kafka_records_written_total", ""), 100.0);
    let letters = kafka.read(&dlq, 4);
    let words = [
        "not a JSON object",
        "has no field `colour`",
        "no value",
        "missing key field `id`",
    ];
    for (i, ((payload, headers), words)) in letters.iter().zip(words).enumerate() {
        assert_eq!(payload.as_slice(), bad[i], "unchanged");
        let header = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("oka.topic"), Some(topic.as_str()));
        assert_eq!(header("oka.partition"), Some("0"));
        assert_eq!(header("oka.offset"), Some((50 + i).to_string().as_str()));
        assert_eq!(header("oka.feature"), Some("clicks"));
        assert!(header("oka.error").unwrap().contains(words), "{headers:?}");
    }
    let log = source.log_text();
    assert!(
        log.contains("record rejected") && log.contains("offset=50"),
        "{log}"
    );
    assert!(source.terminate().success());
    assert_eq!(missing(&spec, &redis, &prefix, 0..100), Vec::<usize>::new());
}

#[test]
fn a_rebalance_between_two_consumers_loses_nothing() {
    let Some((brokers, redis)) = services() else {
        return;
    };
    let kafka = Kafka { brokers };
    let (topic, group, prefix) = (
        unique("clicks"),
        unique("group"),
        format!("{}:", unique("kt")),
    );
    kafka.create_topic(&topic, 4);
    kafka.produce_clicks(&topic, 0, 3000, 4);
    let spec = spec(&topic, &group, "");
    let first = start_source(&spec, &kafka.brokers, &redis, &prefix);
    wait_for("some records written", 2 * MINUTE, || {
        first.metric("oka_kafka_records_written_total", "") >= 200.0
    });
    let mut second = start_source(&spec, &kafka.brokers, &redis, &prefix);
    second.wait_joined();
    kafka.produce_clicks(&topic, 3000, 6000, 4);
    wait_for("the group to commit every offset", 2 * MINUTE, || {
        kafka.committed(&group, &topic, 4) == kafka.ends(&topic, 4)
    });
    assert!(first.metric("oka_kafka_rebalances_total", "kind=\"revoke\"") >= 1.0);
    assert!(
        second.metric("oka_kafka_records_written_total", "") >= 1.0,
        "both consumed"
    );
    assert!(first.terminate().success());
    assert!(second.terminate().success());
    assert_eq!(
        missing(&spec, &redis, &prefix, 0..6000),
        Vec::<usize>::new()
    );
}

#[test]
fn oka_serve_serves_a_kafka_spec_without_kafka() {
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/kafka/spec.yaml"
    );
    let oka = start_oka(&["--spec", spec], None);
    let body = r#"{"target_features":["clicks"],"keys":[{"user_id":"u1"}]}"#;
    let (status, text) = http(oka.addr, "POST", "/v1/features", body).unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(r#""statuses":{"clicks":["missing"]}"#),
        "{text}"
    );
    // The registry names the kind of source that writes the feature.
    let (status, text) = http(oka.addr, "GET", "/v1/features", "").unwrap();
    assert_eq!(status, 200, "{text}");
    let catalog: serde_json::Value = serde_json::from_str(&text).unwrap();
    let clicks = catalog["features"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "clicks")
        .unwrap_or_else(|| panic!("no clicks in {text}"));
    assert_eq!(clicks["source"], "kafka", "{text}");
}

#[test]
fn oka_source_kafka_says_what_is_missing() {
    let run = |spec: &std::path::Path, extra: &[&str]| {
        let out = Command::new(OKA)
            .args(["source", "kafka", "--spec"])
            .arg(spec)
            .args(["--store", "memory://"])
            .args(extra)
            .env_remove("OKA_KAFKA_BROKERS")
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let plain = spec("clicks", "g", "");
    let e = run(&plain, &[]);
    assert!(e.contains("feature `clicks`: no Kafka brokers: give `brokers` in its `source.kafka`, or --brokers (OKA_KAFKA_BROKERS)"), "{e}");
    let e = run(&plain, &["--brokers", "kafka"]);
    assert!(
        e.contains("--brokers `kafka`: list the bootstrap servers as `host:port`"),
        "{e}"
    );
    let e = run(&plain, &["--feature", "clics"]);
    assert!(
        e.contains("--feature `clics`: ")
            && e.contains("has no such feature (its Kafka sources: clicks)"),
        "{e}"
    );
    let typo = spec("clicks", "g", ", options: {fetch.max.byte: 1}");
    let e = run(&typo, &["--brokers", "127.0.0.1:1"]);
    assert!(
        e.contains("feature `clicks`: the Kafka consumer could not be created: `fetch.max.byte` = `1`: No such configuration property"),
        "{e}"
    );
    let e = run(&plain, &["--kafka-option", "group.id=x"]);
    assert!(e.contains("Oka sets `group.id` itself"), "{e}");
    let e = run(&plain, &["--kafka-option", "sasl.password"]);
    assert!(e.contains("`sasl.password`: give KEY=VALUE"), "{e}");
    let e = run(
        &plain,
        &["--brokers", "127.0.0.1:1", "--kafka-option", "no.such=1"],
    );
    assert!(
        e.contains("`no.such` = `1`: No such configuration property"),
        "{e}"
    );
    let none = tmp_file(
        "no-kafka.yaml",
        "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts}\nfeatures:\n  e: {kind: pipeline, entity: E}\n",
    );
    let e = run(&none, &[]);
    assert!(e.contains("declares no Kafka source"), "{e}");
}
