//! One test per class of spec error; each checks the message names the path.

use oka_core::{NativeUdfs, Registry};

const BASE: &str = r#"
version: 1
entities:
  E:
    keys: {id: string}
    timestamp: ts
    fields: {value: float, label: string}
features:
  p:
    kind: pipeline
    entity: E
"#;

/// Loads BASE plus `extra` features and returns the error text.
fn errors(extra: &str) -> String {
    let yaml = format!("{BASE}{extra}");
    match Registry::from_yaml("spec.yaml", &yaml, &NativeUdfs::new()) {
        Ok(_) => panic!("spec should be rejected:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

fn assert_has(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "error should contain {p:?}:\n{err}");
    }
}

#[test]
fn base_spec_is_valid() {
    Registry::from_yaml("spec.yaml", BASE, &NativeUdfs::new()).unwrap();
}

#[test]
fn unsupported_version() {
    let err = Registry::from_yaml(
        "spec.yaml",
        &BASE.replace("version: 1", "version: 2"),
        &NativeUdfs::new(),
    )
    .unwrap_err()
    .to_string();
    assert_has(&err, &["spec.yaml: version: unsupported spec version 2"]);
}

#[test]
fn unknown_yaml_field() {
    let err = errors("  q:\n    kind: pipeline\n    entity: E\n    colour: red\n");
    assert_has(&err, &["spec.yaml: features.q", "unknown field `colour`"]);
}

#[test]
fn unknown_entity() {
    let err = errors("  q:\n    kind: pipeline\n    entity: Nope\n");
    assert_has(
        &err,
        &["spec.yaml: features.q.entity: unknown entity `Nope`"],
    );
}

#[test]
fn unknown_dependency() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [nope]\n    udf: {expr: {value: '1.0'}}\n",
    );
    assert_has(
        &err,
        &["features.q.dependencies[0]: unknown feature `nope`"],
    );
}

#[test]
fn unknown_field_in_expression() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.valu', label: 'p.label'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf.expr.value",
            "`p.valu`: records of `p` (entity `E`) have no field `valu` (did you mean `value`?)",
        ],
    );
}

#[test]
fn unknown_output_field() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value', label: 'p.label', colour: '1'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf.expr.colour",
            "`colour` is not a field of entity `E`",
        ],
    );
}

#[test]
fn missing_output_expression() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf.expr",
            "no expression for output field `label`",
        ],
    );
}

#[test]
fn expression_references_unknown_name() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value * factor', label: 'p.label'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf.expr.value",
            "references unknown name `factor`",
        ],
    );
}

#[test]
fn comprehension_variables_are_not_unknown_names() {
    let yaml = format!(
        "{BASE}  q:\n    kind: on_demand\n    entity: E\n    dependencies: [{{feature: p, query: last_n, n: 3}}]\n    udf: {{expr: {{value: 'size(p.filter(r, r.value > 1.0)) == 0 ? 0.0 : 1.0', label: \"'x'\"}}}}\n"
    );
    Registry::from_yaml("spec.yaml", &yaml, &NativeUdfs::new()).unwrap();
}

#[test]
fn expression_does_not_compile() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value *', label: 'p.label'}}\n",
    );
    assert_has(&err, &["features.q.udf.expr.value", "does not compile"]);
}

#[test]
fn operator_type_mismatch() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value + p.label', label: 'p.label'}}\n",
    );
    assert_has(&err, &["features.q.udf.expr.value", "type mismatch"]);
}

#[test]
fn result_type_mismatch() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.label', label: 'p.label'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf.expr.value",
            "the expression gives string, the field is float",
        ],
    );
}

#[test]
fn arg_default_type_mismatch() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    args: {m: {type: int, default: 'x'}}\n    udf: {expr: {value: 'p.value', label: 'p.label'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.args.m.default",
            "default does not match type int",
        ],
    );
}

#[test]
fn dependency_cycle() {
    let err = errors(
        "  a:\n    kind: on_demand\n    entity: E\n    dependencies: [b]\n    udf: {expr: {value: 'b.value', label: 'b.label'}}\n  b:\n    kind: on_demand\n    entity: E\n    dependencies: [a]\n    udf: {expr: {value: 'a.value', label: 'a.label'}}\n",
    );
    assert_has(&err, &["dependency cycle: ", "a -> b -> a"]);
}

#[test]
fn udf_arg_clashes_with_dependency() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    args: {p: {type: float}}\n    udf: {expr: {value: 'p.value', label: 'p.label'}}\n",
    );
    assert_has(&err, &["features.q.args.p", "clashes with the dependency"]);
}

#[test]
fn udf_arg_reserved_name() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    args: {now: {type: float}}\n    udf: {expr: {value: 'p.value', label: 'p.label'}}\n",
    );
    assert_has(&err, &["features.q.args.now", "`now` is reserved"]);
}

#[test]
fn unregistered_native_udf() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {native: nope}\n",
    );
    assert_has(&err, &["features.q.udf.native", "no native udf `nope`"]);
}

#[test]
fn both_or_neither_udf_kind() {
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {native: x, expr: {value: '1.0'}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.udf",
            "exactly one of `expr`, `native` and `python`",
        ],
    );
}

#[test]
fn range_query_on_on_demand_dependency() {
    let err = errors(
        "  a:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    udf: {expr: {value: 'p.value', label: 'p.label'}}\n  b:\n    kind: on_demand\n    entity: E\n    dependencies: [{feature: a, query: range}]\n    udf: {expr: {value: '1.0', label: \"'x'\"}}\n",
    );
    assert_has(
        &err,
        &[
            "features.b.dependencies[0]",
            "`range` applies only to pipeline features",
        ],
    );
}

#[test]
fn pipeline_feature_with_udf() {
    let err = errors("  q:\n    kind: pipeline\n    entity: E\n    udf: {native: x}\n");
    assert_has(&err, &["features.q.udf", "a pipeline feature has no `udf`"]);
}

#[test]
fn bad_key_type_and_bad_names() {
    let yaml = "version: 1\nentities:\n  E:\n    keys: {id: float}\n    timestamp: ts\n    fields: {'bad-name': int}\nfeatures: {}\n";
    let err = Registry::from_yaml("spec.yaml", yaml, &NativeUdfs::new())
        .unwrap_err()
        .to_string();
    assert_has(
        &err,
        &[
            "entities.E.keys.id",
            "keys must be string or int",
            "entities.E.fields.bad-name",
            "must be an identifier",
        ],
    );
}

#[test]
fn every_error_is_reported_not_just_the_first() {
    let err = errors(
        "  q:\n    kind: pipeline\n    entity: Nope\n  r:\n    kind: pipeline\n    entity: AlsoNope\n",
    );
    assert_has(&err, &["`Nope`", "`AlsoNope`"]);
}

#[test]
fn mock_source_checks_columns() {
    let err = errors(
        "  q:\n    kind: pipeline\n    entity: E\n    source: {mock: {generate: {count: 3, columns: {value: 'double(j)'}}}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.source.mock.generate.columns.value",
            "unknown name `j`",
            "missing key field `id`",
        ],
    );
}

#[test]
fn mock_source_checks_items_by_index_and_field() {
    let err = errors(
        "  q:\n    kind: pipeline\n    entity: E\n    source: {mock: {items: [{id: a, value: 1.0}, {value: x, ts: soon, nope: 1}]}}\n",
    );
    assert_has(
        &err,
        &[
            "features.q.source.mock.items[1].value",
            "features.q.source.mock.items[1].ts",
            "invalid RFC 3339 timestamp `soon`",
            "features.q.source.mock.items[1].nope",
            "entity `E` has no field `nope`",
            "features.q.source.mock.items[1]: missing key field `id`",
        ],
    );
    assert!(!err.contains("items[0]"), "{err}");
    let err =
        errors("  q:\n    kind: pipeline\n    entity: E\n    source: {mock: {period_s: -1}}\n");
    assert_has(
        &err,
        &[
            "features.q.source.mock.period_s",
            "features.q.source.mock: give exactly one of `items` and `generate`",
        ],
    );
}

#[test]
fn ttl_must_be_positive_and_on_pipeline_features() {
    let err = errors("  q:\n    kind: pipeline\n    entity: E\n    ttl_s: -1\n");
    assert_has(&err, &["features.q.ttl_s", "positive number of seconds"]);
    let err = errors(
        "  q:\n    kind: on_demand\n    entity: E\n    dependencies: [p]\n    ttl_s: 5\n    udf: {expr: {value: 'p.value', label: 'p.label'}}\n",
    );
    assert_has(
        &err,
        &["features.q.ttl_s", "an on-demand feature has no `ttl_s`"],
    );
}
