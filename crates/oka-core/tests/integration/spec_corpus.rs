//! The human-error corpus (issue 16): one small, complete spec per kind of
//! mistake a person makes, each with the exact text the loader gives for it.
//! Every line names the file and the place in the spec and says what is wrong
//! in the spec's words; none shows a Rust type, Debug formatting or an internal
//! name (checked for every case).

use oka_core::{NativeUdfs, Registry};

/// What no message may contain: Rust's names, Debug dumps, internals.
const FORBIDDEN: [&str; 16] = [
    "Os {", "kind:", "f64", "usize", "u32", "i64", "struct ", "Some(", "None", "Int(", "Float(",
    "String(", "::", "Value", "Expr", "Box<",
];

/// The spec most cases add to: an entity and a pipeline feature.
const BASE: &str = r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#;

/// (name, spec, the exact message: every line of it). A spec starting with `+` is
/// BASE followed by the rest.
const CASES: &[(&str, &str, &str)] = &[
    // YAML: not YAML, wrong shapes and types, unknown names (the parser stops at the first).
    (
        "not_yaml",
        r#"+  f: {kind: on_demand
"#,
        r#"spec.yaml: not valid YAML: did not find expected ',' or '}' at line 10 column 1, while parsing a flow mapping at line 9 column 6"#,
    ),
    (
        "tab_indentation",
        r#"+  f:
	kind: on_demand
"#,
        r#"spec.yaml: not valid YAML: found character that cannot start any token at line 10 column 1, while scanning for the next token (a tab: YAML indents with spaces)"#,
    ),
    (
        "empty_file",
        r#""#,
        r#"spec.yaml: missing field `version`: a spec starts with `version: 1`"#,
    ),
    (
        "spec_is_a_list",
        r#"- version: 1
- entities: {}
"#,
        r#"spec.yaml: invalid type: a list, expected a spec with `version: 1`, `entities:` and `features:`"#,
    ),
    (
        "history_negative",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, history: -3}
"#,
        r#"spec.yaml: features.txn.history: invalid type: integer `-3`, expected a whole number (0 or more) at line 8 column 47"#,
    ),
    (
        "history_not_a_number",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, history: x}
"#,
        r#"spec.yaml: features.txn.history: invalid type: string "x", expected a whole number (0 or more) at line 8 column 47"#,
    ),
    (
        "history_fraction",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, history: 2.5}
"#,
        r#"spec.yaml: features.txn.history: invalid type: floating point `2.5`, expected a whole number (0 or more) at line 8 column 47"#,
    ),
    (
        "ttl_not_a_number",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, ttl_s: 1h}
"#,
        r#"spec.yaml: features.txn.ttl_s: invalid type: string "1h", expected a number at line 8 column 45"#,
    ),
    (
        "arg_bare_number",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {k: 3}
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount * k"}}
"#,
        r#"spec.yaml: features.f.args.k: invalid type: integer `3`, expected an argument definition such as `{type: float, default: 1.0}` at line 12 column 15"#,
    ),
    (
        "args_as_list",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: [k]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.args: invalid type: a list, expected a mapping such as `{name: value}` at line 12 column 11"#,
    ),
    (
        "keys_as_list",
        r#"version: 1
entities:
  Txn:
    keys: [user_id]
    timestamp: ts
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.keys: invalid type: a list, expected a mapping such as `{name: value}` at line 4 column 11"#,
    ),
    (
        "feature_as_list",
        r#"version: 1
entities:
  Txn: {keys: {user_id: string}, timestamp: ts}
features:
  txn: [pipeline, Txn]
"#,
        r#"spec.yaml: features.txn: invalid type: a list, expected a feature: a mapping with `kind` (`pipeline` or `on_demand`) and `entity`, `output` or `aggregate` at line 5 column 8"#,
    ),
    (
        "expr_as_list",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: ["txn.amount"]}
"#,
        r#"spec.yaml: features.f.udf.expr: invalid type: a list, expected a mapping such as `{name: value}` at line 13 column 17"#,
    ),
    (
        "entity_as_null",
        r#"version: 1
entities:
  Txn: null
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn: invalid type: an empty value, expected an entity such as `{keys: {id: string}, timestamp: ts, fields: {value: float}}` at line 3 column 8"#,
    ),
    (
        "empty_entity",
        r#"version: 1
entities:
  Txn:
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn: missing field `keys` at line 3 column 7"#,
    ),
    (
        "empty_feature",
        r#"+  f:
"#,
        r#"spec.yaml: features.f: missing field `kind` at line 9 column 5"#,
    ),
    (
        "missing_kind",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {entity: Txn}
"#,
        r#"spec.yaml: features.txn: missing field `kind` at line 8 column 8"#,
    ),
    (
        "missing_timestamp",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn: missing field `timestamp` at line 4 column 5"#,
    ),
    (
        "dependency_as_number",
        r#"+  f:
    kind: on_demand
    dependencies: [3]
    output: {fields: {n: int}}
    udf: {expr: {n: "1"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: invalid type: integer `3`, expected a feature name or a mapping such as `{feature: txn, query: range, lookback_s: 3600}` at line 11 column 20"#,
    ),
    (
        "dependency_object_typo",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, qurey: range}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: unknown field `qurey` (did you mean `query`?), expected one of `feature`, `query`, `n`, `lookback_s` at line 11 column 35"#,
    ),
    (
        "unknown_field_close",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, histroy: 10}
"#,
        r#"spec.yaml: features.txn: unknown field `histroy` (did you mean `history`?), expected one of `kind`, `entity`, `output`, `aggregate`, `description`, `dependencies`, `args`, `udf`, `history`, `ttl_s`, `source` at line 8 column 38"#,
    ),
    (
        "unknown_field_far",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, colour: red}
"#,
        r#"spec.yaml: features.txn: unknown field `colour`, expected one of `kind`, `entity`, `output`, `aggregate`, `description`, `dependencies`, `args`, `udf`, `history`, `ttl_s`, `source` at line 8 column 38"#,
    ),
    (
        "unknown_top_level_field",
        r#"+entitys: {}
"#,
        r#"spec.yaml: unknown field `entitys` (did you mean `entities`?), expected one of `version`, `entities`, `features` at line 9 column 1"#,
    ),
    (
        "unknown_type",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: flaot, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.fields.amount: unknown type `flaot` (did you mean `float`?), expected string, int, float, bool, timestamp or list<T> at line 6 column 22"#,
    ),
    (
        "unknown_list_type",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: list<flaot>, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.fields.amount: unknown type `list<flaot>` (did you mean `list<float>`?), expected string, int, float, bool, timestamp or list<T> at line 6 column 22"#,
    ),
    (
        "bad_kind",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: stream, entity: Txn}
"#,
        r#"spec.yaml: features.txn.kind: unknown variant `stream`, expected `pipeline` or `on_demand` at line 8 column 15"#,
    ),
    (
        "bad_kind_typo",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipline, entity: Txn}
"#,
        r#"spec.yaml: features.txn.kind: unknown variant `pipline` (did you mean `pipeline`?), expected `pipeline` or `on_demand` at line 8 column 15"#,
    ),
    (
        "bad_query",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: window}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.dependencies[0].query: unknown variant `window`, expected one of `latest`, `range`, `last_n` at line 11 column 42"#,
    ),
    (
        "feature_declared_twice",
        r#"+  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: features: `txn` is declared twice at line 9 column 3"#,
    ),
    (
        "field_key_repeated",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, amount: int}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.fields: `amount` is declared twice at line 6 column 29"#,
    ),
    (
        "expression_given_twice",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf:
      expr:
        v: "txn.amount"
        v: "txn.amount * 2.0"
"#,
        r#"spec.yaml: features.f.udf.expr: `v` is declared twice at line 16 column 9"#,
    ),
    // Version.
    (
        "version_2",
        r#"version: 2
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: version: unsupported spec version 2 (expected 1)"#,
    ),
    (
        "version_missing",
        r#"entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: missing field `version`: a spec starts with `version: 1`"#,
    ),
    (
        "version_text",
        r#"version: one
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: version: invalid type: string "one", expected a whole number (0 or more) at line 1 column 10"#,
    ),
    // Names.
    (
        "entity_name_not_identifier",
        r#"version: 1
entities:
  Txn-1:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn-1}
"#,
        r#"spec.yaml: entities.Txn-1: entity name `Txn-1` must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"#,
    ),
    (
        "field_name_not_identifier",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, unit price: float}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.fields.unit price: field name `unit price` must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"#,
    ),
    (
        "feature_name_reserved_word",
        r#"+  in:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.in: feature name `in` is reserved"#,
    ),
    (
        "feature_name_now",
        r#"+  now:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.now: feature name `now` is reserved"#,
    ),
    (
        "feature_name_math",
        r#"+  math:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.math: feature name `math` is reserved"#,
    ),
    (
        "argument_name_reserved",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {null: {type: float}}
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.args.null: argument name `null` is reserved"#,
    ),
    // Entities and references.
    (
        "entity_without_keys",
        r#"version: 1
entities:
  Txn:
    keys: {}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.keys: an entity needs at least one key field"#,
    ),
    (
        "float_key",
        r#"version: 1
entities:
  Txn:
    keys: {score: float}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn.keys.score: key field `score` has type float; keys must be string or int"#,
    ),
    (
        "field_declared_twice",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, ts: timestamp}
features:
  txn: {kind: pipeline, entity: Txn}
"#,
        r#"spec.yaml: entities.Txn: field `ts` is declared twice"#,
    ),
    (
        "unknown_entity",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Tnx}
"#,
        r#"spec.yaml: features.txn.entity: unknown entity `Tnx` (did you mean `Txn`?)"#,
    ),
    (
        "pipeline_without_entity",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline}
"#,
        r#"spec.yaml: features.txn: a pipeline feature needs `entity`: the entity whose records it holds"#,
    ),
    (
        "unknown_dependency",
        r#"+  f:
    kind: on_demand
    dependencies: [tx]
    output: {fields: {v: float}}
    udf: {expr: {v: "tx.amount"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: unknown feature `tx` (did you mean `txn`?)"#,
    ),
    (
        "cycle",
        r#"+  a:
    kind: on_demand
    entity: Txn
    dependencies: [b]
    udf: {expr: {amount: "b.amount", label: "b.label"}}
  b:
    kind: on_demand
    entity: Txn
    dependencies: [a]
    udf: {expr: {amount: "a.amount", label: "a.label"}}
"#,
        r#"spec.yaml: features.a.dependencies: dependency cycle: a -> b -> a"#,
    ),
    // Dependency options.
    (
        "n_on_range",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: range, n: 5}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: `n` applies only to `last_n`"#,
    ),
    (
        "n_zero",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 0}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: `n` must be at least 1"#,
    ),
    (
        "lookback_not_positive",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: range, lookback_s: 0}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.dependencies[0]: `lookback_s` must be a positive number"#,
    ),
    (
        "last_n_on_on_demand",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
  g:
    kind: on_demand
    dependencies: [{feature: f, query: last_n, n: 3}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(f)"}}
"#,
        r#"spec.yaml: features.g.dependencies[0]: `last_n` applies only to pipeline features; `f` is on-demand"#,
    ),
    (
        "dependency_listed_twice",
        r#"+  f:
    kind: on_demand
    dependencies: [txn, {feature: txn, query: last_n, n: 3}]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.dependencies[1]: `txn` is listed twice"#,
    ),
    // Kinds, arguments and UDFs.
    (
        "pipeline_with_udf",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    udf: {expr: {amount: "1.0"}}
"#,
        r#"spec.yaml: features.txn.udf: a pipeline feature has no `udf`"#,
    ),
    (
        "pipeline_with_dependencies",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    dependencies: [txn]
"#,
        r#"spec.yaml: features.txn.dependencies: a pipeline feature has no `dependencies`"#,
    ),
    (
        "history_zero",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn: {kind: pipeline, entity: Txn, history: 0}
"#,
        r#"spec.yaml: features.txn.history: history must be at least 1"#,
    ),
    (
        "on_demand_with_history",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    history: 10
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.history: an on-demand feature has no `history`"#,
    ),
    (
        "on_demand_without_output",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f: an on-demand feature needs an output: `entity: NAME`, `output: {fields: {…}}` (keys and timestamp from its first dependency) or `aggregate: {…}`"#,
    ),
    (
        "arg_default_wrong_type",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {k: {type: float, default: "high"}}
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount * k"}}
"#,
        r#"spec.yaml: features.f.args.k.default: default does not match type float: expected float, got string"#,
    ),
    (
        "arg_default_int_for_bool",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {on: {type: bool, default: 1}}
    output: {fields: {v: float}}
    udf: {expr: {v: "on ? txn.amount : 0.0"}}
"#,
        r#"spec.yaml: features.f.args.on.default: default does not match type bool: expected bool, got int"#,
    ),
    (
        "arg_clashes_with_dependency",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {txn: {type: float, default: 1.0}}
    output: {fields: {v: float}}
    udf: {expr: {v: "1.0"}}
"#,
        r#"spec.yaml: features.f.args.txn: argument `txn` clashes with the dependency of that name"#,
    ),
    (
        "udf_missing",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
"#,
        r#"spec.yaml: features.f: an on-demand feature needs a `udf` (`expr`, `native` or `python`)"#,
    ),
    (
        "udf_expr_and_native",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}, native: scale}
"#,
        r#"spec.yaml: features.f.udf: give exactly one of `expr`, `native` and `python`"#,
    ),
    (
        "udf_unknown_native",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {native: window_mean}
"#,
        r#"spec.yaml: features.f.udf.native: no native udf `window_mean` is registered in this binary (registered: none)"#,
    ),
    // CEL expressions.
    (
        "cel_does_not_compile",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount * (2.0"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: does not compile: a `)` is missing, at column 18 of `txn.amount * (2.0`"#,
    ),
    (
        "cel_unknown_name",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    args: {multiplier: {type: float, default: 1.0}}
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount * multiplyer"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: references unknown name `multiplyer` (did you mean `multiplier`?) (known: txn, multiplier, now)"#,
    ),
    (
        "cel_unknown_field_latest",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amout"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: `txn.amout`: records of `txn` (entity `Txn`) have no field `amout` (did you mean `amount`?)"#,
    ),
    (
        "cel_typo_in_map",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.sum(txn.map(r, r.amout))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: `r.amout`: records of `txn` (entity `Txn`) have no field `amout` (did you mean `amount`?)"#,
    ),
    (
        "cel_typo_in_filter",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn.filter(r, r.lable == 'x'))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.n: `r.lable`: records of `txn` (entity `Txn`) have no field `lable` (did you mean `label`?)"#,
    ),
    (
        "cel_typo_in_exists",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {big: bool}}
    udf: {expr: {big: "txn.exists(r, r.amont > 100.0)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.big: `r.amont`: records of `txn` (entity `Txn`) have no field `amont` (did you mean `amount`?)"#,
    ),
    (
        "cel_field_on_list",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: `txn.amount`: `txn` is a list of records (a `range` or `last_n` dependency), not one record: write `txn.map(r, r.amount)` for every record's `amount`, or `txn[size(txn) - 1].amount` for the newest"#,
    ),
    (
        "cel_int_times_float",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount * 2"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `txn.amount * 2`: `*` is not defined for double and int (CEL does not mix int and double: write 2.0 instead of 2, or double(x))"#,
    ),
    (
        "cel_result_type_mismatch",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.label"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `txn.label`: the expression gives string, the field is float"#,
    ),
    (
        "cel_result_is_a_map",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "{'a': txn.amount}"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `{'a': txn.amount}`: the expression gives map, the field is float; a map cannot be a field value"#,
    ),
    (
        "cel_result_is_a_duration",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {age_s: int}}
    udf: {expr: {age_s: "now - txn.ts"}}
"#,
        r#"spec.yaml: features.f.udf.expr.age_s: type mismatch in `now - txn.ts`: the expression gives duration, the field is int; a duration cannot be a field value (`.getSeconds()` gives its whole seconds as an int)"#,
    ),
    (
        "cel_sum_of_strings",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.sum(txn.map(r, r.label))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `math.sum(txn.map(r, r.label))`: math.sum: takes a list of int or float; element 0 is string"#,
    ),
    (
        "cel_sum_of_a_number",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.sum(txn.amount)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `math.sum(txn.amount)`: `math.sum` does not take (double); write `math.sum(list)`"#,
    ),
    (
        "cel_mean_of_int_and_float",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.mean([1, txn.amount])"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `math.mean([1, txn.amount])`: math.mean: the list mixes int and float values; convert them with double() first"#,
    ),
    (
        "cel_percentile_out_of_range",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.percentile(txn.map(r, r.amount), 1.5)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `math.percentile(txn.map(r, r.amount), 1.5)`: math.percentile: p must be between 0 and 1 (0.9 for the 90th percentile), got 1.5"#,
    ),
    (
        "cel_wrong_argument_count",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "math.sqrt(txn.amount, 2.0)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.v: type mismatch in `math.sqrt(txn.amount, 2.0)`: no overload of `math.sqrt` takes (double, double)"#,
    ),
    (
        "cel_missing_expression",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float, w: float}}
    udf: {expr: {v: "txn.amount"}}
"#,
        r#"spec.yaml: features.f.udf.expr: no expression for output field `w`"#,
    ),
    (
        "cel_expression_for_unknown_field",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount", w: "1.0"}}
"#,
        r#"spec.yaml: features.f.udf.expr.w: `w` is not a field of the output (did you mean `v`?); declare it under `output.fields`"#,
    ),
    (
        "cel_typo_for_entity_field",
        r#"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "txn.amount", lable: "txn.label"}}
"#,
        r#"spec.yaml: features.f.udf.expr.lable: `lable` is not a field of entity `Txn` (did you mean `label`?)
spec.yaml: features.f.udf.expr: no expression for output field `label`"#,
    ),
    (
        "cel_all_condition_not_bool",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {all_big: bool}}
    udf: {expr: {all_big: "txn.all(r, r.amount)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.all_big: type mismatch in `txn.all(r, r.amount)`: the condition of `all` gives double; it must be a bool"#,
    ),
    (
        "cel_filter_condition_not_bool",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {n: int}}
    udf: {expr: {n: "size(txn.filter(r, r.label))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.n: type mismatch in `size(txn.filter(r, r.label))`: a condition gives string; it must be a bool"#,
    ),
    (
        "cel_ewma_wrong_arguments",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {d: float}}
    udf: {expr: {d: "math.ewma(txn.map(r, r.amount), now, 600, now)"}}
"#,
        r#"spec.yaml: features.f.udf.expr.d: type mismatch in `math.ewma(txn.map(r, r.amount), now, 600, now)`: `math.ewma` does not take (list, timestamp, int, timestamp); write `math.ewma(values, timestamps, duration('10m'), now)`"#,
    ),
    (
        "cel_misspelt_math_function",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {m: float}}
    udf: {expr: {m: "math.maen(txn.map(r, r.amount))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.m: `math.maen` is not a function (did you mean `math.mean`?)"#,
    ),
    (
        "cel_unknown_math_function",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {m: float}}
    udf: {expr: {m: "math.avg(txn.map(r, r.amount))"}}
"#,
        r#"spec.yaml: features.f.udf.expr.m: `math.avg` is not a function (the math functions: greatest, least, ceil, floor, round, trunc, abs, sign, sqrt, isInf, isNaN, isFinite, bitAnd, bitOr, bitXor, bitNot, bitShiftLeft, bitShiftRight, sum, mean, min, max, stddev, percentile, ewma)"#,
    ),
    (
        "cel_aggregation_as_method",
        r#"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 10}]
    output: {fields: {total: float}}
    udf: {expr: {total: "txn.map(r, r.amount).sum()"}}
"#,
        r#"spec.yaml: features.f.udf.expr.total: references unknown function or name `sum` (did you mean `math.sum(list)`?)"#,
    ),
    (
        "cel_result_mixed_list",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {pair: list<float>}}
    udf: {expr: {pair: "[txn.amount, txn.label]"}}
"#,
        r#"spec.yaml: features.f.udf.expr.pair: type mismatch in `[txn.amount, txn.label]`: the expression gives a list of float and string, the field is list<float>"#,
    ),
    // Output declared in place.
    (
        "output_without_dependencies",
        r#"+  f:
    kind: on_demand
    output: {fields: {v: float}}
    udf: {expr: {v: "1.0"}}
"#,
        r#"spec.yaml: features.f.output: `output` takes its keys and timestamp from the first dependency; list one under `dependencies`"#,
    ),
    (
        "output_field_is_a_key",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {user_id: string}}
    udf: {expr: {user_id: "txn.label"}}
"#,
        r#"spec.yaml: features.f.output.fields.user_id: `user_id` is a key field of entity `Txn`, whose keys and timestamp the output takes; pick another name"#,
    ),
    (
        "output_without_fields",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {}}
    udf: {expr: {}}
"#,
        r#"spec.yaml: features.f.output.fields: declare at least one output field"#,
    ),
    (
        "entity_and_output",
        r#"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {amount: "txn.amount", label: "txn.label"}}
"#,
        r#"spec.yaml: features.f: give only one of `entity`, `output` and `aggregate`"#,
    ),
    // Aggregate.
    (
        "aggregate_over_latest",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: txn
      outputs: {n: count}
"#,
        r#"spec.yaml: features.f.aggregate.over: an aggregate reads a window of records: `query: range` (with `lookback_s`) or `query: last_n` (with `n`)"#,
    ),
    (
        "aggregate_over_on_demand",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
  g:
    kind: on_demand
    aggregate:
      over: {feature: f, query: last_n, n: 10}
      outputs: {n: count}
"#,
        r#"spec.yaml: features.g.aggregate.over: `last_n` applies only to pipeline features; `f` is on-demand"#,
    ),
    (
        "aggregate_unknown_aggregation",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {n: cnt}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.n: `cnt` is not an aggregation: write `count` (the records in the window) or a mapping such as `{mean: amount}`"#,
    ),
    (
        "aggregate_misspelt_aggregation",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {total: {summ: amount}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.total: unknown field `summ` (did you mean `sum`?), expected one of `count`, `sum`, `mean`, `min`, `max`, `stddev`, `percentile`, `ewma`, `first`, `last`, `p`, `half_life_s` at line 13 column 25"#,
    ),
    (
        "aggregate_output_list",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {n: [count]}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.n: invalid type: a list, expected `count` or a mapping such as `{mean: amount}` at line 13 column 20"#,
    ),
    (
        "aggregate_two_in_one",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {total: {sum: amount, mean: amount}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.total: give exactly one aggregation (count, sum, mean, min, max, stddev, percentile, ewma, first or last), got sum, mean"#,
    ),
    (
        "aggregate_percentile_without_p",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {p90: {percentile: amount}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.p90: `percentile` needs `p`, the quantile in [0, 1] (`p: 0.9` for the 90th percentile)"#,
    ),
    (
        "aggregate_p_out_of_range",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {p90: {percentile: amount, p: 90}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.p90: percentile: p must be between 0 and 1 (0.9 for the 90th percentile), got 90"#,
    ),
    (
        "aggregate_ewma_without_half_life",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {d: {ewma: amount}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.d: `ewma` needs `half_life_s`, the seconds after which a value weighs half"#,
    ),
    (
        "aggregate_field_typo",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {mean: {mean: amout}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.mean: entity `Txn` has no field `amout` (did you mean `amount`?)"#,
    ),
    (
        "aggregate_sum_of_string",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {total: {sum: label}}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.total: `sum` takes a field of type int or float; `label` is string"#,
    ),
    (
        "aggregate_output_is_key",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {user_id: count}
"#,
        r#"spec.yaml: features.f.aggregate.outputs.user_id: `user_id` is a key field of entity `Txn`, whose keys and timestamp the output takes; pick another name"#,
    ),
    (
        "aggregate_with_udf",
        r#"+  f:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {n: count}
    udf: {expr: {n: "size(txn)"}}
"#,
        r#"spec.yaml: features.f.udf: an aggregate feature has no `udf`: it reads `aggregate.over`"#,
    ),
    (
        "aggregate_with_dependencies",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    aggregate:
      over: {feature: txn, query: last_n, n: 10}
      outputs: {n: count}
"#,
        r#"spec.yaml: features.f.dependencies: an aggregate feature has no `dependencies`: it reads `aggregate.over`"#,
    ),
    // Mock sources.
    (
        "mock_items_and_generate",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        items: [{user_id: a, amount: 1.0}]
        generate: {count: 2, columns: {user_id: "string(i)"}}
"#,
        r#"spec.yaml: features.txn.source.mock: give exactly one of `items` and `generate`"#,
    ),
    (
        "mock_item_wrong_type",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        items: [{user_id: a, amount: lots}]
"#,
        r#"spec.yaml: features.txn.source.mock.items[0].amount: expected float, got string"#,
    ),
    (
        "mock_item_missing_key",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        items: [{amount: 1.0}]
"#,
        r#"spec.yaml: features.txn.source.mock.items[0]: missing key field `user_id`"#,
    ),
    (
        "mock_item_timestamp",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        items: [{user_id: a, ts: yesterday}]
"#,
        r#"spec.yaml: features.txn.source.mock.items[0].ts: invalid RFC 3339 timestamp `yesterday`"#,
    ),
    (
        "mock_item_unknown_field",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        items: [{user_id: a, amout: 1.0}]
"#,
        r#"spec.yaml: features.txn.source.mock.items[0].amout: entity `Txn` has no field `amout` (did you mean `amount`?)"#,
    ),
    (
        "mock_generate_unknown_name",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        generate: {count: 2, columns: {user_id: "string(j)"}}
"#,
        r#"spec.yaml: features.txn.source.mock.generate.columns.user_id: references unknown name `j` (did you mean `i`?) (known: i, tick)"#,
    ),
    (
        "mock_generate_wrong_type",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        generate: {count: 2, columns: {user_id: "string(i)", amount: "'x' + string(i)"}}
"#,
        r#"spec.yaml: features.txn.source.mock.generate.columns.amount: type mismatch in `'x' + string(i)`: the expression gives string, the field is float"#,
    ),
    (
        "mock_generate_does_not_compile",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        generate: {count: 2, columns: {user_id: "string(i"}}
"#,
        r#"spec.yaml: features.txn.source.mock.generate.columns.user_id: does not compile: a `)` is missing, at column 9 of `string(i`"#,
    ),
    (
        "mock_generate_int_times_float",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        generate: {count: 2, columns: {user_id: "string(i)", amount: "i * 1.5"}}
"#,
        r#"spec.yaml: features.txn.source.mock.generate.columns.amount: type mismatch in `i * 1.5`: `*` is not defined for int and double (CEL does not mix int and double: write 2.0 instead of 2, or double(x))"#,
    ),
    (
        "mock_generate_division_by_zero",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        generate: {count: 2, columns: {user_id: "string(i)", amount: "double(10 / i)"}}
"#,
        r#"spec.yaml: features.txn.source.mock.generate.columns.amount: `double(10 / i)` fails for the first record (i = 0, tick = 0): division by zero"#,
    ),
    (
        "mock_period_negative",
        r#"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      mock:
        period_s: -1
        items: [{user_id: a}]
"#,
        r#"spec.yaml: features.txn.source.mock.period_s: period_s must be a non-negative number"#,
    ),
    (
        "mock_on_demand",
        r#"+  f:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {v: float}}
    udf: {expr: {v: "txn.amount"}}
    source: {mock: {items: [{user_id: a}]}}
"#,
        r#"spec.yaml: features.f.source: an on-demand feature has no `source`"#,
    ),
];

/// A line's text after its path (`features.txn.kind: unknown variant …` → `unknown
/// variant …`): the path is the spec's own names (a feature's `kind` field would
/// otherwise read as the Debug form's `kind:`); a line without one is all text.
fn message_text(line: &str) -> &str {
    match line.split_once(": ") {
        Some((path, text)) if !path.contains(char::is_whitespace) => text,
        _ => line,
    }
}

#[test]
fn every_human_error_has_its_exact_message() {
    assert!(CASES.len() >= 30, "{} cases", CASES.len());
    let mut names: Vec<&str> = CASES.iter().map(|(name, _, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), CASES.len(), "case names repeat");
    for (name, spec, want) in CASES {
        let spec = match spec.strip_prefix('+') {
            Some(rest) => format!("{BASE}{rest}"),
            None => (*spec).to_owned(),
        };
        let got = match Registry::from_yaml("spec.yaml", &spec, &NativeUdfs::new()) {
            Ok(_) => panic!("{name}: the spec should be rejected"),
            Err(e) => e.to_string(),
        };
        assert_eq!(&got, want, "{name}");
        for line in got.lines() {
            let Some(rest) = line.strip_prefix("spec.yaml: ") else {
                panic!("{name}: a line without the file name: {line}");
            };
            let text = message_text(rest);
            for bad in FORBIDDEN {
                assert!(!text.contains(bad), "{name} shows `{bad}`: {line}");
            }
        }
    }
}
