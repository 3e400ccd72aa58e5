//! Plans are built at load and share reads between dependents.

use oka_core::execute::{Fetched, Outcome, execute};
use oka_core::plan::{Origin, SlotQuery};
use oka_core::{ErrorCode, FeatureRequest, Registry, Timestamp, Value};
use serde_json::json;

use super::registry;

fn request(v: serde_json::Value) -> FeatureRequest {
    serde_json::from_value(v).unwrap()
}

#[test]
fn shared_dependency_is_one_slot_and_one_fetch() {
    let r = registry();
    let ids = |names: &[&str]| {
        let mut v: Vec<_> = names.iter().map(|n| r.feature_id(n).unwrap()).collect();
        v.sort_unstable();
        v
    };
    let plan = r.plan(&ids(&[
        "simple_feature",
        "plus_feature",
        "chained_feature",
        "test_feature",
    ]));
    // test_feature is read once for all three dependents and the direct target.
    let reads: Vec<_> = plan
        .slots
        .iter()
        .filter(|s| s.feature == r.feature_id("test_feature").unwrap())
        .collect();
    assert_eq!(
        reads.len(),
        2,
        "one dependency slot plus the direct target: {plan:?}"
    );
    assert!(reads.iter().any(|s| s.query == SlotQuery::Direct));

    let req = request(json!({
        "target_features": ["simple_feature", "plus_feature", "chained_feature", "test_feature"],
        "keys": [{"id": "a"}, {"id": "b"}],
    }));
    let prepared = r.prepare(&req, Timestamp(0)).unwrap();
    assert_eq!(prepared.groups.len(), 1);
    assert_eq!(
        prepared.fetches().len(),
        1,
        "latest reads deduplicated at request time"
    );
}

#[test]
fn chained_features_are_ordered_after_their_inputs() {
    let r = registry();
    let chained = r.feature_id("chained_feature").unwrap();
    let simple = r.feature_id("simple_feature").unwrap();
    let plan = r.plan(&[chained]);
    let pos = |f| plan.steps.iter().position(|s| s.feature == f).unwrap();
    assert!(pos(simple) < pos(chained));
    assert_eq!(
        plan.steps[pos(chained)].inputs,
        vec![Origin::Step(pos(simple))]
    );
    assert_eq!(plan.results, vec![Origin::Step(pos(chained))]);
}

#[test]
fn single_target_plans_are_precomputed_and_shared() {
    let r = registry();
    let id = r.feature_id("simple_feature").unwrap();
    assert!(std::sync::Arc::ptr_eq(&r.plan(&[id]), &r.plan(&[id])));
    let two = {
        let mut v = vec![id, r.feature_id("plus_feature").unwrap()];
        v.sort_unstable();
        v
    };
    assert!(
        std::sync::Arc::ptr_eq(&r.plan(&two), &r.plan(&two)),
        "multi-target plans are cached"
    );
}

#[test]
fn range_reads_are_parameterised_per_dependent() {
    let r = registry();
    let req = request(json!({
        "target_features": ["window_feature", "simple_feature"],
        "keys": [{"id": "a"}],
        "query_args": {"window_feature": {"start": 1.0, "end": 2.0}},
    }));
    let prepared = r.prepare(&req, Timestamp(10_000_000)).unwrap();
    let queries: Vec<_> = prepared.fetches().map(|(_, f)| f.query).collect();
    assert!(queries.contains(&oka_core::Query::Latest));
    assert!(queries.contains(&oka_core::Query::Range {
        start: Timestamp(1_000_000),
        end: Timestamp(2_000_000)
    }));
    // Without query_args the spec's lookback applies.
    let req = request(json!({"target_features": ["window_feature"], "keys": [{"id": "a"}]}));
    let prepared = r.prepare(&req, Timestamp(100_000_000)).unwrap();
    assert_eq!(
        prepared.fetches().next().unwrap().1.query,
        oka_core::Query::Range {
            start: Timestamp(40_000_000),
            end: Timestamp(100_000_000)
        }
    );
}

#[test]
fn volga_feature_keys_reach_chained_targets() {
    let r = registry();
    let req = request(json!({
        "target_features": ["chained_feature"],
        "feature_keys": {"simple_feature": [{"id": "a"}, {"id": "b"}, {"id": "c"}]},
        "query_args": null,
        "udf_args": {"simple_feature": {"multiplier": 2.0}, "chained_feature": {"offset": 1.0}},
    }));
    let prepared = r.prepare(&req, Timestamp(0)).unwrap();
    assert_eq!(prepared.key_count(), 3);
}

#[test]
fn identical_key_lists_for_two_inputs_are_both_used() {
    let r = registry();
    let keys = json!([{"id": "a"}]);
    let req = request(json!({
        "target_features": ["chained_feature"],
        "feature_keys": {"simple_feature": keys, "test_feature": keys},
    }));
    let prepared = r.prepare(&req, Timestamp(0)).unwrap();
    assert_eq!(prepared.key_count(), 1);
    let req = request(json!({
        "target_features": ["chained_feature"],
        "feature_keys": {"simple_feature": keys, "test_feature": [{"id": "b"}]},
    }));
    let e = r.prepare(&req, Timestamp(0)).unwrap_err();
    assert!(e.message.contains("different keys"), "{e}");
}

#[test]
fn request_errors_name_the_culprit() {
    use oka_core::ErrorCode::*;
    let r = registry();
    let cases = [
        (
            json!({"target_features": [], "keys": [{"id": "a"}]}),
            InvalidRequest,
            "empty",
        ),
        (
            json!({"target_features": ["nope"], "keys": [{"id": "a"}]}),
            UnknownFeature,
            "`nope`",
        ),
        (
            json!({"target_features": ["simple_feature"]}),
            MissingKeys,
            "no keys for `simple_feature`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": []}),
            MissingKeys,
            "empty",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"idd": "a"}]}),
            InvalidKey,
            "unknown key field `idd`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}, {"id": "b", "x": 1, "y": 2}, {"y": 3}]}),
            InvalidKey,
            "key 1: unknown key field `x`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}, {}, {"id": "c", "id": 1}]}),
            InvalidKey,
            "key 1 lacks field `id`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}, {"id": 2, "id": "b"}, {"id": "c", "id": 1}]}),
            InvalidKey,
            "key 2: field `id` must be string",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": 1}]}),
            InvalidKey,
            "must be string",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"m": 1}}}),
            UnknownUdfArg,
            "unknown argument `m`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}], "udf_args": {"simple_feature": {"multiplier": "x"}}}),
            InvalidUdfArg,
            "expected float",
        ),
        (
            json!({"target_features": ["last_feature"], "keys": [{"id": "a"}], "query_args": {"last_feature": {"n": 0}}}),
            InvalidQueryArg,
            "`query_args.last_feature.n`",
        ),
        (
            json!({"target_features": ["window_feature"], "keys": [{"id": "a"}], "query_args": {"window_feature": {"start": 5, "end": 1}}}),
            InvalidQueryArg,
            "`start` is after `end`",
        ),
        (
            json!({"target_features": ["window_feature"], "keys": [{"id": "a"}], "query_args": {"window_feature": {"from": 5}}}),
            InvalidQueryArg,
            "unknown parameter `from`",
        ),
        (
            json!({"target_features": ["simple_feature"], "keys": [{"id": "a"}], "feature_keys": {"other_feature": [{"id": "b"}]}}),
            InvalidRequest,
            "no target needs",
        ),
    ];
    for (body, code, text) in cases {
        let e = r.prepare(&request(body.clone()), Timestamp(0)).unwrap_err();
        assert_eq!(e.code, code, "{body}: {e}");
        assert!(e.message.contains(text), "{body}: {e}");
    }
}

/// An on-demand feature whose output entity has a key field (`session`) that no
/// entity read has: its key values are parsed once, with the same strictness as the
/// storage keys, and reach the UDF's output record.
#[test]
fn output_only_key_fields_are_typed_once_and_reach_the_output() {
    let spec = r#"
version: 1
entities:
  User:
    keys: {user: string}
    timestamp: ts
    fields: {amount: float}
  UserSession:
    keys: {user: string, session: int}
    timestamp: ts
    fields: {score: float}
features:
  spend:
    kind: pipeline
    entity: User
  session_score:
    kind: on_demand
    entity: UserSession
    dependencies: [spend]
    udf:
      expr: {score: "spend.amount * 2.0"}
"#;
    let r = Registry::from_yaml("sessions.yaml", spec, &oka_core::NativeUdfs::new()).unwrap();
    let prepare = |keys: serde_json::Value| {
        r.prepare(
            &request(json!({"target_features": ["session_score"], "keys": keys})),
            Timestamp(5_000_000),
        )
    };

    let prepared = prepare(json!([{"user": "a", "session": 3}])).unwrap();
    assert_eq!(
        prepared.groups[0].step_keys[0].of(0),
        [Value::from("a"), Value::Int(3)]
    );
    let row = oka_core::Row::new(
        Timestamp(1),
        vec![
            Value::from("a"),
            Value::Timestamp(Timestamp(1)),
            Value::Float(4.0),
        ],
    );
    let fetched = Fetched::read_all(&prepared, |_| vec![vec![row.clone()]]).unwrap();
    let out = execute(&r, &prepared, &fetched, None).unwrap();
    let Outcome::Present(rows) = &out.of(&prepared.targets[0])[0] else {
        panic!("{out:?}")
    };
    assert_eq!(rows[0].columns[1], Value::Int(3), "{rows:?}");

    // A field the request leaves out is null for the output; a wrong type is refused.
    let prepared = prepare(json!([{"user": "a"}])).unwrap();
    assert_eq!(
        prepared.groups[0].step_keys[0].of(0),
        [Value::from("a"), Value::Null]
    );
    let err = prepare(json!([{"user": "a", "session": "three"}])).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidKey);
    assert_eq!(
        err.message,
        "key 0: field `session` must be int, got string"
    );
    for (session, message) in [
        (
            json!(9_223_372_036_854_775_808u64),
            "is out of the int range",
        ),
        (json!(3.0), "must be int, got float"),
        (json!(null), "must be int, got null"),
        (json!(true), "must be int, got bool"),
        (json!([3]), "must be int, got list"),
        (json!({"n": 3}), "must be int, got object"),
    ] {
        let err = prepare(json!([{"user": "a", "session": session}])).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidKey);
        assert_eq!(err.message, format!("key 0: field `session` {message}"));
    }
}

/// `FeatureRequest::FIELDS` (which tells an unknown field from other errors) lists
/// exactly the fields serde accepts.
#[test]
fn the_request_field_list_matches_the_type() {
    let err = serde_json::from_str::<FeatureRequest>(r#"{"zz": 1}"#)
        .unwrap_err()
        .to_string();
    let listed: Vec<String> = FeatureRequest::FIELDS
        .iter()
        .map(|f| format!("`{f}`"))
        .collect();
    assert!(err.contains(&listed.join(", ")), "{err}");
    for f in FeatureRequest::FIELDS {
        let body = format!(r#"{{"{f}": null}}"#);
        let e = oka_core::json::from_slice_strict::<FeatureRequest>(
            body.as_bytes(),
            FeatureRequest::FIELDS,
        );
        assert!(
            !matches!(e, Err(oka_core::json::BodyError::UnknownField { .. })),
            "{f}: {e:?}"
        );
    }
}

#[test]
fn one_field_string_keys_are_stored_under_their_canonical_encoding() {
    let r = registry();
    let texts = ["plain", "a|b", r"a\b", "", "ключ🔑|\\|"];
    let keys: Vec<_> = texts.iter().map(|t| json!({"id": t})).collect();
    let req = request(json!({"target_features": ["simple_feature"], "keys": keys}));
    let prepared = r.prepare(&req, Timestamp(0)).unwrap();
    let (_, fetch) = prepared.fetches().next().unwrap();
    let stored: Vec<&str> = fetch.keys.iter().map(|k| k.as_str()).collect();
    let canonical: Vec<String> = (texts.iter())
        .map(|t| oka_core::EntityKey::encode([&oka_core::Value::from(*t)]).to_string())
        .collect();
    assert_eq!(stored, canonical);
    assert_eq!(stored[1], r"a\|b");
    assert_eq!(stored[2], r"a\\b");
    // The UDF sees the text as sent.
    assert_eq!(
        prepared.groups[0].step_keys[0].of(1),
        [oka_core::Value::from("a|b")]
    );
}
