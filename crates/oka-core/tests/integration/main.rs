//! oka-core integration tests: spec validation, planning, execution.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod aggregation;
mod docs;
mod execution;
mod planning;
mod spec_corpus;
mod spec_errors;
mod spec_messages;
mod volga_guide;

use oka_core::{NativeUdfs, Registry};

/// The seed spec plus a chained feature, a second consumer of `test_feature`, and
/// range / last_n features.
pub const SPEC: &str = r#"
version: 1
entities:
  TestEntity:
    keys: {id: string}
    timestamp: timestamp
    fields: {value: float}
  Count:
    keys: {id: string}
    timestamp: timestamp
    fields: {n: int, total: float}
features:
  test_feature:
    kind: pipeline
    entity: TestEntity
  other_feature:
    kind: pipeline
    entity: TestEntity
  simple_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {multiplier: {type: float, default: 1.0}}
    udf:
      expr: {value: "test_feature.value * multiplier", timestamp: "now"}
  plus_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf:
      expr: {value: "test_feature.value + 100.0"}
  far_future_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf:
      expr: {value: "test_feature.value", timestamp: "now + duration('315576000000s')"}
  chained_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [simple_feature]
    args: {offset: {type: float, default: 0.0}}
    udf:
      expr: {value: "simple_feature.value + offset"}
  sum_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature, other_feature]
    udf:
      expr: {value: "test_feature.value + other_feature.value"}
  window_feature:
    kind: on_demand
    entity: Count
    dependencies:
      - {feature: test_feature, query: range, lookback_s: 60}
    udf:
      expr:
        n: "size(test_feature)"
        total: "size(test_feature) == 0 ? 0.0 : math.greatest(test_feature.map(r, r.value))"
  last_feature:
    kind: on_demand
    entity: Count
    dependencies:
      - {feature: test_feature, query: last_n, n: 2}
    udf:
      expr:
        n: "size(test_feature)"
        total: "size(test_feature) == 0 ? 0.0 : test_feature[0].value"
  fragile_feature:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    udf:
      native: fragile
  after_fragile:
    kind: on_demand
    entity: TestEntity
    dependencies: [fragile_feature]
    udf:
      expr: {value: "fragile_feature.value"}
"#;

/// Native UDFs for the tests: `fragile` fails for value 13 and panics for 666.
pub fn natives() -> NativeUdfs {
    let mut n = NativeUdfs::new();
    n.register("fragile", |call: &oka_core::UdfCall<'_>| {
        let v = call.input("test_feature")?.one()?.float("value")?;
        if v == 13.0 {
            return Err(oka_core::UdfError::failed("unlucky"));
        }
        if v == 666.0 {
            panic!("fragile udf panicked on purpose");
        }
        Ok(vec![call.output().set("value", v)?.build()])
    });
    n
}

/// The test registry.
pub fn registry() -> Registry {
    Registry::from_yaml("test.yaml", SPEC, &natives()).unwrap()
}
