//! `docs/migrating-from-volga.md`: every whole spec in it loads, and the requests it
//! shows give the values it states (over in-test data, as `execution.rs` runs them).

use std::collections::HashMap;

use oka_core::execute::{Fetched, Outcome, execute};
use oka_core::request::Fetch;
use oka_core::{EntityKey, FeatureRequest, NativeUdfs, Query, Registry, Row, Timestamp, Value};
use serde_json::json;

use crate::docs::blocks;

const GUIDE: &str = include_str!("../../../../docs/migrating-from-volga.md");

/// The guide's whole specs: its ```yaml blocks with a `version: 1` line.
fn specs() -> Vec<&'static str> {
    blocks(GUIDE, "yaml")
        .into_iter()
        .filter(|b| b.lines().any(|l| l == "version: 1"))
        .collect()
}

/// The registry of the guide's spec that defines feature `name`.
fn registry_defining(name: &str) -> Registry {
    let header = format!("\n  {name}:");
    let spec = specs()
        .into_iter()
        .find(|s| s.contains(&header))
        .unwrap_or_else(|| panic!("no spec in the guide defines `{name}`"));
    Registry::from_yaml("migrating-from-volga.md", spec, &NativeUdfs::new()).unwrap()
}

fn ts(rfc3339: &str) -> Timestamp {
    Timestamp::parse_rfc3339(rfc3339).unwrap()
}

/// Records by (feature, canonical key), oldest first.
#[derive(Default)]
struct Data(HashMap<(String, String), Vec<Row>>);

impl Data {
    /// Writes `record` (JSON, by column name) to pipeline feature `feature`.
    fn put(&mut self, r: &Registry, feature: &str, record: serde_json::Value) {
        let entity = &r.feature(r.feature_id(feature).unwrap()).entity;
        let columns: Vec<Value> = entity
            .columns
            .iter()
            .map(|c| c.ty.from_json(&record[&*c.name]).unwrap())
            .collect();
        let Value::Timestamp(t) = columns[entity.timestamp_index] else {
            panic!("a record without its timestamp: {record}")
        };
        let key = EntityKey::encode(entity.key_index.iter().map(|&i| &columns[i]));
        let h = self
            .0
            .entry((feature.to_owned(), key.as_str().to_owned()))
            .or_default();
        h.push(Row::new(t, columns));
        h.sort_by_key(|row| row.event_time);
    }

    fn read(&self, r: &Registry, f: &Fetch) -> Vec<Vec<Row>> {
        let name = &r.feature(f.feature).name;
        f.keys
            .iter()
            .map(|k| {
                let h = self
                    .0
                    .get(&(name.to_string(), k.as_str().to_owned()))
                    .cloned()
                    .unwrap_or_default();
                match f.query {
                    Query::Latest => h.last().cloned().into_iter().collect(),
                    Query::LastN { n } => h[h.len().saturating_sub(n)..].to_vec(),
                    Query::Range { start, end } => h
                        .into_iter()
                        .filter(|row| row.event_time >= start && row.event_time <= end)
                        .collect(),
                }
            })
            .collect()
    }
}

/// The answer to `body` at `now`: per target, per key, the outcome.
struct Answer<'r> {
    registry: &'r Registry,
    outcomes: HashMap<String, Vec<Outcome>>,
}

impl Answer<'_> {
    /// Column `column` of the first record of `feature` for key number `key`.
    fn get(&self, feature: &str, key: usize, column: &str) -> Value {
        let entity = &self
            .registry
            .feature(self.registry.feature_id(feature).unwrap())
            .entity;
        let i = entity
            .column_index(column)
            .unwrap_or_else(|| panic!("`{feature}` has no column `{column}`"));
        match &self.outcomes[feature][key] {
            Outcome::Present(rows) => rows[0].columns[i].clone(),
            other => panic!("`{feature}` key {key}: expected a value, got {other:?}"),
        }
    }

    fn column(&self, feature: &str, column: &str) -> Vec<Value> {
        (0..self.outcomes[feature].len())
            .map(|k| self.get(feature, k, column))
            .collect()
    }
}

fn run<'r>(r: &'r Registry, data: &Data, body: serde_json::Value, now: Timestamp) -> Answer<'r> {
    let req: FeatureRequest = serde_json::from_value(body).unwrap();
    let prepared = r.prepare(&req, now).unwrap();
    let fetched = Fetched::read_all(&prepared, |f| data.read(r, f)).unwrap();
    let outputs = execute(r, &prepared, &fetched, None).unwrap();
    let outcomes = prepared
        .targets
        .iter()
        .map(|t| {
            (
                r.feature(t.feature).name.to_string(),
                outputs.of(t).to_vec(),
            )
        })
        .collect();
    Answer {
        registry: r,
        outcomes,
    }
}

fn floats(values: &[f64]) -> Vec<Value> {
    values.iter().map(|v| Value::Float(*v)).collect()
}

#[test]
fn every_whole_spec_in_the_guide_loads() {
    let specs = specs();
    for (i, spec) in specs.iter().enumerate() {
        if let Err(e) = Registry::from_yaml(
            &format!("migrating-from-volga.md spec {i}"),
            spec,
            &NativeUdfs::new(),
        ) {
            panic!("{e}\n--- the spec:\n{spec}");
        }
    }
    // Patterns 1, 2, 3, 4, 5 and 7.
    assert!(specs.len() >= 6, "only {} whole specs found", specs.len());
}

#[test]
fn the_serving_and_copying_sections_are_written() {
    for heading in [
        "\n## Serving a running Volga deployment (layout=volga)\n",
        "\n## Copying the data: oka migrate volga\n",
    ] {
        assert!(GUIDE.contains(heading), "missing heading {heading:?}");
    }
    assert!(!GUIDE.contains("*To be written"), "a placeholder is left");
}

/// Pattern 1: Volga's seed, `value × multiplier`, over the latest values of Volga's
/// test data (2.0, 3.0, 4.0).
#[test]
fn pattern_1_seed_multiplier() {
    let r = registry_defining("simple_feature");
    let mut d = Data::default();
    for (id, v) in [("test-id", 2.0), ("test-id-1", 3.0), ("test-id-2", 4.0)] {
        d.put(
            &r,
            "test_feature",
            json!({"id": id, "timestamp": "2024-01-01T12:00:00Z", "value": v}),
        );
    }
    let now = ts("2024-01-01T12:00:05Z");
    let keys = json!([{"id": "test-id"}, {"id": "test-id-1"}, {"id": "test-id-2"}]);
    let a = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature"],
               "feature_keys": {"simple_feature": keys},
               "udf_args": {"simple_feature": {"multiplier": 2.0}}}),
        now,
    );
    assert_eq!(
        a.column("simple_feature", "value"),
        floats(&[4.0, 6.0, 8.0])
    );
    // The key comes from the request, the timestamp is the request time.
    assert_eq!(a.get("simple_feature", 1, "id"), Value::from("test-id-1"));
    assert_eq!(
        a.get("simple_feature", 0, "timestamp"),
        Value::Timestamp(now)
    );
    // Without udf_args the default multiplier, 1.0.
    let a = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature"], "feature_keys": {"simple_feature": keys}}),
        now,
    );
    assert_eq!(
        a.column("simple_feature", "value"),
        floats(&[2.0, 3.0, 4.0])
    );
    // A key with no record: missing.
    let a = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature"], "keys": [{"id": "nope"}]}),
        now,
    );
    assert_eq!(a.outcomes["simple_feature"], [Outcome::Missing]);
    // `value * 2` mixes float and int: refused at load.
    let spec = specs()
        .into_iter()
        .find(|s| s.contains("\n  simple_feature:") && s.contains("\n  test_feature:"))
        .unwrap()
        .replace("test_feature.value * multiplier", "test_feature.value * 2");
    let e = Registry::from_yaml("x.yaml", &spec, &NativeUdfs::new()).unwrap_err();
    assert!(e.to_string().contains("type mismatch"), "{e}");
}

/// Pattern 2: Volga's `test_executor.py` data, three records per key.
fn executor_data(r: &Registry) -> Data {
    let mut d = Data::default();
    for (id, values) in [
        ("test-id", [1.0, 1.5, 2.0]),
        ("test-id-1", [2.0, 2.5, 3.0]),
        ("test-id-2", [3.0, 3.5, 4.0]),
    ] {
        for (t, v) in ["11:58", "11:59", "12:00"].iter().zip(values) {
            d.put(
                r,
                "pipeline_feature",
                json!({"id": id, "timestamp": format!("2024-01-01T{t}:00Z"), "value": v}),
            );
        }
    }
    d
}

#[test]
fn pattern_2_chained_as_volgas_test_sends_it() {
    let r = registry_defining("chained_feature");
    let d = executor_data(&r);
    let a = run(
        &r,
        &d,
        json!({"target_features": ["chained_feature"],
               "feature_keys": {"simple_feature": [{"id": "test-id"}, {"id": "test-id-1"}]},
               "udf_args": {"simple_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 1.0}}}),
        ts("2024-01-01T12:00:05Z"),
    );
    assert_eq!(
        a.column("chained_feature", "computed_value"),
        floats(&[5.0, 7.0])
    );
    assert_eq!(a.get("chained_feature", 0, "num_entities"), Value::Int(1));
}

#[test]
fn pattern_2_two_queries_on_one_pipeline_feature() {
    let r = registry_defining("list_feature");
    let d = executor_data(&r);
    let now = ts("2024-01-01T12:00:05Z");
    let a = run(
        &r,
        &d,
        json!({"target_features": ["simple_feature", "list_feature", "list_feature_cel"],
               "feature_keys": {
                   "simple_feature": [{"id": "test-id"}, {"id": "test-id-1"}],
                   "list_feature": [{"id": "test-id"}, {"id": "test-id-1"}, {"id": "test-id-2"}],
                   "list_feature_cel": [{"id": "test-id"}, {"id": "test-id-1"}, {"id": "test-id-2"}]},
               "query_args": {
                   "list_feature": {"start": "2024-01-01T10:00:00Z", "end": "2024-01-01T12:00:00Z"},
                   "list_feature_cel": {"start": "2024-01-01T10:00:00Z", "end": "2024-01-01T12:00:00Z"}},
               "udf_args": {"simple_feature": {"multiplier": 2.0}}}),
        now,
    );
    assert_eq!(
        a.column("simple_feature", "computed_value"),
        floats(&[4.0, 6.0])
    );
    for f in ["list_feature", "list_feature_cel"] {
        assert_eq!(
            a.column(f, "computed_value"),
            floats(&[4.5, 7.5, 10.5]),
            "{f}"
        );
        assert_eq!(a.column(f, "num_entities"), vec![Value::Int(3); 3], "{f}");
    }
    // An empty range: the request's key, 0.0 and 0.
    let a = run(
        &r,
        &d,
        json!({"target_features": ["list_feature"], "keys": [{"id": "test-id"}],
               "query_args": {"list_feature": {"start": "2023-01-01T00:00:00Z", "end": "2023-01-02T00:00:00Z"}}}),
        now,
    );
    assert_eq!(a.get("list_feature", 0, "id"), Value::from("test-id"));
    assert_eq!(
        a.get("list_feature", 0, "computed_value"),
        Value::Float(0.0)
    );
    assert_eq!(a.get("list_feature", 0, "num_entities"), Value::Int(0));
    // `start: 0` (epoch seconds) opens the range; `end` defaults to the request time.
    let a = run(
        &r,
        &d,
        json!({"target_features": ["list_feature"], "keys": [{"id": "test-id-2"}],
               "query_args": {"list_feature": {"start": 0}}}),
        now,
    );
    assert_eq!(a.get("list_feature", 0, "num_entities"), Value::Int(3));
    // Without `start` (no lookback_s in the spec), and with a naive time: refused.
    for args in [
        json!({"end": "2024-01-01T12:00:00Z"}),
        json!({"start": "2024-01-01T10:00:00"}),
    ] {
        let req: FeatureRequest = serde_json::from_value(json!({
            "target_features": ["list_feature"], "keys": [{"id": "test-id"}],
            "query_args": {"list_feature": args}}))
        .unwrap();
        let e = r.prepare(&req, now).unwrap_err();
        assert_eq!(
            e.code,
            oka_core::ErrorCode::InvalidQueryArg,
            "{args}: {e:?}"
        );
    }
}

/// Pattern 3: the diamond, keys given as Volga gave them (under both level-1
/// features) and as one `keys` list.
#[test]
fn pattern_3_diamond() {
    let r = registry_defining("level3_feature");
    let mut d = Data::default();
    let t = "2026-03-01T10:00:00Z";
    d.put(
        &r,
        "base_feature1",
        json!({"id": "a", "timestamp": t, "value": 2.0}),
    );
    d.put(
        &r,
        "base_feature2",
        json!({"id": "a", "timestamp": t, "value": 5.0}),
    );
    let now = ts("2026-03-01T10:00:01Z");
    for body in [
        json!({"target_features": ["level3_feature"],
               "feature_keys": {"level1_feature1": [{"id": "a"}], "level1_feature2": [{"id": "a"}]}}),
        json!({"target_features": ["level3_feature"], "keys": [{"id": "a"}]}),
    ] {
        let a = run(&r, &d, body, now);
        assert_eq!(
            a.get("level3_feature", 0, "computed_value"),
            Value::Float(7.0)
        );
    }
}

/// Pattern 4: two entities, a compound key, the timestamp of one input.
#[test]
fn pattern_4_compound_key_and_two_entities() {
    let r = registry_defining("user_order_stats");
    let mut d = Data::default();
    d.put(
        &r,
        "user_source",
        json!({"user_id": "123", "timestamp": "2026-03-01T09:00:00Z", "name": "John"}),
    );
    d.put(
        &r,
        "user_order_pipeline",
        json!({"user_id": "123", "product_id": "123", "timestamp": "2026-03-01T10:00:00Z",
               "product_name": "Product", "user_name": "John"}),
    );
    let a = run(
        &r,
        &d,
        json!({"target_features": ["user_order_stats"],
               "keys": [{"user_id": "123", "product_id": "123"}]}),
        ts("2026-03-01T11:00:00Z"),
    );
    assert_eq!(a.get("user_order_stats", 0, "user_id"), Value::from("123"));
    assert_eq!(
        a.get("user_order_stats", 0, "order_name"),
        Value::from("Product")
    );
    assert_eq!(
        a.get("user_order_stats", 0, "timestamp"),
        Value::Timestamp(ts("2026-03-01T09:00:00Z"))
    );
}

/// Pattern 5 (float × int, the input's timestamp) and pattern 6 (the pipeline
/// feature as a target).
#[test]
fn pattern_5_and_6_user_stats() {
    let r = registry_defining("user_spent_pipeline");
    let mut d = Data::default();
    d.put(
        &r,
        "user_spent_pipeline",
        json!({"user_id": "7", "timestamp": "2026-03-01T10:00:00Z",
               "avg_spent_7d": 100.0, "num_purchases_1h": 8}),
    );
    let a = run(
        &r,
        &d,
        json!({"target_features": ["user_stats", "user_spent_pipeline"],
               "keys": [{"user_id": "7"}]}),
        ts("2026-03-01T10:30:00Z"),
    );
    assert_eq!(a.get("user_stats", 0, "total_spent"), Value::Float(800.0));
    assert_eq!(a.get("user_stats", 0, "purchase_count"), Value::Int(8));
    let Value::Timestamp(t) = a.get("user_stats", 0, "timestamp") else {
        panic!("no timestamp")
    };
    assert_eq!(t, ts("2026-03-01T10:00:00Z"));
    // As the guide shows it on each route.
    let mut naive = Vec::new();
    t.write_naive_utc(&mut naive);
    assert_eq!(String::from_utf8(naive).unwrap(), "2026-03-01T10:00:00");
    assert_eq!(t.to_rfc3339(), "2026-03-01T10:00:00.000000+00:00");
    // Pattern 6: the pipeline feature itself, its latest record.
    assert_eq!(
        a.get("user_spent_pipeline", 0, "avg_spent_7d"),
        Value::Float(100.0)
    );
}

/// Pattern 7: the pipeline's windows, computed per request.
#[test]
fn pattern_7_windows_at_request_time() {
    let r = registry_defining("orders");
    let now = ts("2026-03-10T12:00:00Z");
    let ago = |secs: i64| Value::Timestamp(Timestamp(now.0 - secs * 1_000_000)).to_json();
    let mut d = Data::default();
    for (secs, ty, price) in [
        (8 * 86_400, "ON_SALE", 500.0),
        (2 * 86_400, "ON_SALE", 100.0),
        (30 * 60, "ON_SALE", 100.0),
        (10 * 60, "ON_SALE", 40.0),
        (5 * 60, "NORMAL", 999.0),
    ] {
        d.put(
            &r,
            "orders",
            json!({"buyer_id": "1", "purchased_at": ago(secs), "product_id": "p",
                   "product_type": ty, "product_price": price}),
        );
    }
    let a = run(
        &r,
        &d,
        json!({"target_features": ["user_stats"], "keys": [{"buyer_id": "1"}]}),
        now,
    );
    assert_eq!(a.get("user_stats", 0, "avg_spent_7d"), Value::Float(80.0));
    assert_eq!(a.get("user_stats", 0, "num_purchases_1h"), Value::Int(2));
    assert_eq!(a.get("user_stats", 0, "total_spent"), Value::Float(160.0));
    // A buyer without on-sale orders: 0.0, not an error.
    let a = run(
        &r,
        &d,
        json!({"target_features": ["user_stats"], "keys": [{"buyer_id": "2"}]}),
        now,
    );
    assert_eq!(a.get("user_stats", 0, "total_spent"), Value::Float(0.0));
    assert_eq!(a.get("user_stats", 0, "avg_spent_7d"), Value::Null);
}
