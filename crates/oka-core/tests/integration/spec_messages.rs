//! The bad-spec corpus: one small spec per kind of mistake, each with the exact
//! text `oka validate` prints for it. Every message names the file, the path in
//! the spec and what was expected in the spec's words; none shows a Rust type
//! name or Debug formatting (checked for every case).

use oka_core::{NativeUdfs, Registry};

/// What no message may contain: Rust's names and dumps.
const FORBIDDEN: [&str; 14] = [
    "f64", "usize", "u32", "i64", "struct ", "Some(", "None", "Int(", "Float(", "String(", "::",
    "Box<", "@result", "_+_",
];

/// The spec most cases add to: an entity and a pipeline feature.
const BASE: &str = r##"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, n: int, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
"##;

/// (name, the spec, the exact message). A spec starting with `+` is BASE followed
/// by the rest.
const CASES: &[(&str, &str, &str)] = &[
    (
        "entity_order_problems",
        r##"version: 1
entities:
  A:
    keys: {id: string}
    timestamp: ts
    fields: {value: float, n: int}
    order: [id, valeu, ts, n]
  B:
    keys: {id: string}
    timestamp: ts
    fields: {value: float, n: int}
    order: [id, n, id, ts]
features: {}
"##,
        r##"spec.yaml: entities.A.order[1]: `valeu` is not a field of entity `A` (its fields: id, ts, value, n) (did you mean `value`?)
spec.yaml: entities.B.order[2]: `id` is listed twice
spec.yaml: entities.B.order: `order` lists the answer order of every field, and leaves out `value`: add it"##,
    ),
    (
        "aggregate_output_value_shape",
        r##"+  a:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 3}
      outputs: {n: [count]}
"##,
        r##"spec.yaml: features.a.aggregate.outputs.n: invalid type: a list, expected `count` or a mapping such as `{mean: amount}` at line 15 column 20"##,
    ),
    (
        "aggregate_problems",
        r##"+  a:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: range, lookback_s: 60}
      outputs:
        k: cnt
        both: {sum: amount, mean: amount}
        p: {percentile: amount}
        q: {percentile: amount, p: 90}
        m: {mean: amout}
        s: {sum: label}
        h: {mean: amount, half_life_s: 5}
        e: {ewma: amount}
        none: {}
"##,
        r##"spec.yaml: features.a.aggregate.outputs.k: `cnt` is not an aggregation: write `count` (the records in the window) or a mapping such as `{mean: amount}`
spec.yaml: features.a.aggregate.outputs.both: give exactly one aggregation (count, sum, mean, min, max, stddev, percentile, ewma, first or last), got sum, mean
spec.yaml: features.a.aggregate.outputs.p: `percentile` needs `p`, the quantile in [0, 1] (`p: 0.9` for the 90th percentile)
spec.yaml: features.a.aggregate.outputs.q: percentile: p must be between 0 and 1 (0.9 for the 90th percentile), got 90
spec.yaml: features.a.aggregate.outputs.m: entity `Txn` has no field `amout` (did you mean `amount`?)
spec.yaml: features.a.aggregate.outputs.s: `sum` takes a field of type int or float; `label` is string
spec.yaml: features.a.aggregate.outputs.h: `half_life_s` applies only to `ewma`
spec.yaml: features.a.aggregate.outputs.e: `ewma` needs `half_life_s`, the seconds after which a value weighs half
spec.yaml: features.a.aggregate.outputs.none: give exactly one aggregation (count, sum, mean, min, max, stddev, percentile, ewma, first or last), got none"##,
    ),
    (
        "aggregate_shape",
        r##"+  a:
    kind: on_demand
    aggregate:
      over: txn
      outputs: {n: count}
  b:
    kind: on_demand
    dependencies: [txn]
    udf: {expr: {n: "1"}}
    aggregate:
      over: {feature: txn, query: last_n, n: 3}
      outputs: {n: count}
"##,
        r##"spec.yaml: features.a.aggregate.over: an aggregate reads a window of records: `query: range` (with `lookback_s`) or `query: last_n` (with `n`)
spec.yaml: features.b.dependencies: an aggregate feature has no `dependencies`: it reads `aggregate.over`
spec.yaml: features.b.udf: an aggregate feature has no `udf`: it reads `aggregate.over`"##,
    ),
    (
        "aggregate_sum_typo",
        r##"+  a:
    kind: on_demand
    aggregate:
      over: {feature: txn, query: last_n, n: 3}
      outputs: {n: {summ: amount}}
"##,
        r##"spec.yaml: features.a.aggregate.outputs.n: unknown field `summ` (did you mean `sum`?), expected one of `count`, `sum`, `mean`, `min`, `max`, `stddev`, `percentile`, `ewma`, `first`, `last`, `p`, `half_life_s` at line 15 column 21"##,
    ),
    (
        "arg_bare_number",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    args: {k: 3}
    udf: {expr: {amount: "txn.amount"}}
"##,
        r##"spec.yaml: features.f.args.k: invalid type: integer `3`, expected an argument definition such as `{type: float, default: 1.0}` at line 15 column 15"##,
    ),
    (
        "arg_default_and_clash",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    args: {k: {type: float, default: "x"}, txn: {type: int}}
    udf: {expr: {amount: "txn.amount"}}
"##,
        r##"spec.yaml: features.f.args.k.default: default does not match type float: expected float, got string
spec.yaml: features.f.args.txn: argument `txn` clashes with the dependency of that name
spec.yaml: features.f.udf.expr.amount: type mismatch in `txn.amount`: cannot read a field of an int
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "bad_kind",
        r##"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, n: int, label: string}
features:
  txn:
    kind: stream
    entity: Txn
"##,
        r##"spec.yaml: features.txn.kind: unknown variant `stream`, expected `pipeline` or `on_demand` at line 9 column 11"##,
    ),
    (
        "bad_names",
        r##"version: 1
entities:
  Txn-1:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, n: int, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn-1
  now:
    kind: pipeline
    entity: Txn-1
  math:
    kind: pipeline
    entity: Txn-1
"##,
        r##"spec.yaml: entities.Txn-1: entity name `Txn-1` must be an identifier ([A-Za-z_][A-Za-z0-9_]*)
spec.yaml: features.now: feature name `now` is reserved
spec.yaml: features.math: feature name `math` is reserved"##,
    ),
    (
        "cel_agg_types",
        r##"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: last_n, n: 5}]
    output: {fields: {a: float, b: float, c: float, d: float}}
    udf: {expr: {a: "math.sum(txn.map(r, r.label))", b: "math.mean([1, 2.5])", c: "math.percentile(txn.map(r, r.amount), 1.5)", d: "math.ewma(txn.map(r, r.amount), txn.map(r, r.ts), duration('0s'), now)"}}
"##,
        r##"spec.yaml: features.f.udf.expr.a: type mismatch in `math.sum(txn.map(r, r.label))`: math.sum: takes a list of int or float; element 0 is string
spec.yaml: features.f.udf.expr.b: type mismatch in `math.mean([1, 2.5])`: math.mean: the list mixes int and float values; convert them with double() first
spec.yaml: features.f.udf.expr.c: type mismatch in `math.percentile(txn.map(r, r.amount), 1.5)`: math.percentile: p must be between 0 and 1 (0.9 for the 90th percentile), got 1.5
spec.yaml: features.f.udf.expr.d: type mismatch in `math.ewma(txn.map(r, r.amount), txn.map(r, r.ts), duration('…`: math.ewma: the half-life must be a positive duration"##,
    ),
    (
        "cel_comparison_and_index",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [{feature: txn, query: last_n, n: 5}]
    udf: {expr: {amount: "txn['x'].amount", n: "txn.size() < 'a' ? 1 : 2", label: "-txn[0].label"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: type mismatch in `txn['x'].amount`: `[] (indexing)` is not defined for (list, string)
spec.yaml: features.f.udf.expr.n: type mismatch in `txn.size() < 'a' ? 1 : 2`: `<` is not defined for (int, string)
spec.yaml: features.f.udf.expr.label: type mismatch in `-txn[0].label`: `- (negation)` is not defined for (string)"##,
    ),
    (
        "cel_compile",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "txn.amount *"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: does not compile: the expression ends where a value is expected, at column 13 of `txn.amount *`
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "cel_fields_coverage",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "1.0", colour: "1.0"}}
"##,
        r##"spec.yaml: features.f.udf.expr.colour: `colour` is not a field of entity `Txn` (user_id, ts, amount, n, label)
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "cel_int_times_float",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "txn.amount * 2", n: "txn.n + txn.amount", label: "txn.label * 2"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: type mismatch in `txn.amount * 2`: `*` is not defined for double and int (CEL does not mix int and double: write 2.0 instead of 2, or double(x))
spec.yaml: features.f.udf.expr.n: type mismatch in `txn.n + txn.amount`: `+` is not defined for int and double (CEL does not mix int and double: write 2.0 instead of 2, or double(x))
spec.yaml: features.f.udf.expr.label: type mismatch in `txn.label * 2`: `*` is not defined for string and int"##,
    ),
    (
        "cel_lambda_typo",
        r##"+  f:
    kind: on_demand
    dependencies: [{feature: txn, query: range, lookback_s: 3600}]
    output: {fields: {m: float, any_big: bool}}
    udf: {expr: {m: "math.mean(txn.map(r, r.amout))", any_big: "txn.exists(r, r.amont > 100.0)"}}
"##,
        r##"spec.yaml: features.f.udf.expr.m: `r.amout`: records of `txn` (entity `Txn`) have no field `amout` (did you mean `amount`?)
spec.yaml: features.f.udf.expr.any_big: `r.amont`: records of `txn` (entity `Txn`) have no field `amont` (did you mean `amount`?)"##,
    ),
    (
        "cel_result_type",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "txn.label"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: type mismatch in `txn.label`: the expression gives string, the field is float
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "cel_unknown_field",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "txn.amuont"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: `txn.amuont`: records of `txn` (entity `Txn`) have no field `amuont` (did you mean `amount`?)
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "cel_unknown_name",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    args: {multiplier: {type: float, default: 1.0}}
    udf: {expr: {amount: "txn.amount * multiplyer"}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: references unknown name `multiplyer` (did you mean `multiplier`?) (known: txn, multiplier, now)
spec.yaml: features.f.udf.expr: no expression for output field `n`
spec.yaml: features.f.udf.expr: no expression for output field `label`"##,
    ),
    (
        "cycle",
        r##"+  a:
    kind: on_demand
    entity: Txn
    dependencies: [b]
    udf: {expr: {amount: "1.0"}}
  b:
    kind: on_demand
    entity: Txn
    dependencies: [a]
    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.a.dependencies: dependency cycle: a -> b -> a"##,
    ),
    (
        "dep_object_typo",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [{feature: txn, qurey: range}]
    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.f.dependencies[0]: unknown field `qurey` (did you mean `query`?), expected one of `feature`, `query`, `n`, `lookback_s` at line 14 column 35"##,
    ),
    (
        "dep_options",
        r##"+  a:
    kind: on_demand
    entity: Txn
    dependencies: [{feature: txn, query: range, n: 3, lookback_s: 0}]
    udf: {expr: {amount: "1.0"}}
  b:
    kind: on_demand
    entity: Txn
    dependencies: [{feature: a, query: last_n, n: 2}]
    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.a.dependencies[0]: `n` applies only to `last_n`
spec.yaml: features.a.dependencies[0]: `lookback_s` must be a positive number
spec.yaml: features.b.dependencies[0]: `last_n` applies only to pipeline features; `a` is on-demand"##,
    ),
    (
        "dep_wrong_shape",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [3]
    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.f.dependencies[0]: invalid type: integer `3`, expected a feature name or a mapping such as `{feature: txn, query: range, lookback_s: 3600}` at line 14 column 20"##,
    ),
    (
        "deps_not_list",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: {txn: 1}
    udf: {expr: {amount: "txn.amount"}}
"##,
        r##"spec.yaml: features.f.dependencies: invalid type: a mapping, expected a list such as `[a, b]` at line 14 column 19"##,
    ),
    (
        "entity_problems",
        r##"+  p2:
    kind: pipeline
    entity: E2
entities_extra: 1
"##,
        r##"spec.yaml: unknown field `entities_extra`, expected one of `version`, `entities`, `features` at line 14 column 1"##,
    ),
    (
        "history_negative",
        r##"+    history: -3
"##,
        r##"spec.yaml: features.txn.history: invalid type: integer `-3`, expected a whole number (0 or more) at line 11 column 14"##,
    ),
    (
        "history_text",
        r##"+    history: lots
"##,
        r##"spec.yaml: features.txn.history: invalid type: string "lots", expected a whole number (0 or more) at line 11 column 14"##,
    ),
    (
        "mock_source",
        r##"+    source:
      mock:
        items: [{ts: yesterday, colour: red}, {user_id: a, amount: "x"}]
"##,
        r##"spec.yaml: features.txn.source.mock.items[0].ts: invalid RFC 3339 timestamp `yesterday`
spec.yaml: features.txn.source.mock.items[0].colour: entity `Txn` has no field `colour`
spec.yaml: features.txn.source.mock.items[0]: missing key field `user_id`
spec.yaml: features.txn.source.mock.items[1].amount: expected float, got string"##,
    ),
    (
        "no_keys_float_key_dup",
        r##"version: 1
entities:
  A: {keys: {}, timestamp: ts}
  B: {keys: {x: float}, timestamp: ts, fields: {ts: int}}
features:
  p: {kind: pipeline, entity: A}
"##,
        r##"spec.yaml: entities.A.keys: an entity needs at least one key field
spec.yaml: entities.B.keys.x: key field `x` has type float; keys must be string or int
spec.yaml: entities.B: field `ts` is declared twice"##,
    ),
    (
        "output_and_entity",
        r##"+  a:
    kind: on_demand
    entity: Txn
    output: {fields: {x: float}}
    dependencies: [txn]
    udf: {expr: {x: "1.0"}}
  b:
    kind: on_demand
    dependencies: [txn]
    udf: {expr: {x: "1.0"}}
"##,
        r##"spec.yaml: features.a: give only one of `entity`, `output` and `aggregate`
spec.yaml: features.b: an on-demand feature needs an output: `entity: NAME`, `output: {fields: {…}}` (keys and timestamp from its first dependency) or `aggregate: {…}`"##,
    ),
    (
        "output_problems",
        r##"+  a:
    kind: on_demand
    output: {fields: {x: float}}
    udf: {expr: {x: "1.0"}}
  b:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {user_id: float, ts: int}}
    udf: {expr: {user_id: "1.0"}}
  c:
    kind: on_demand
    dependencies: [txn]
    output: {fields: {}}
    udf: {expr: {}}
"##,
        r##"spec.yaml: features.a.output: `output` takes its keys and timestamp from the first dependency; list one under `dependencies`
spec.yaml: features.b.output.fields.user_id: `user_id` is a key field of entity `Txn`, whose keys and timestamp the output takes; pick another name
spec.yaml: features.b.output.fields.ts: `ts` is the timestamp field of entity `Txn`, whose keys and timestamp the output takes; pick another name
spec.yaml: features.c.output.fields: declare at least one output field"##,
    ),
    (
        "pipeline_with_udf",
        r##"+    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.txn.udf: a pipeline feature has no `udf`"##,
    ),
    (
        "ttl_text",
        r##"+    ttl_s: soon
"##,
        r##"spec.yaml: features.txn.ttl_s: invalid type: string "soon", expected a number at line 11 column 12"##,
    ),
    (
        "udf_missing_both_native",
        r##"+  a:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
  b:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {expr: {amount: "1.0"}, native: f}
  c:
    kind: on_demand
    entity: Txn
    dependencies: [txn]
    udf: {native: my_udf}
"##,
        r##"spec.yaml: features.a: an on-demand feature needs a `udf` (`expr`, `native` or `python`)
spec.yaml: features.b.udf: give exactly one of `expr`, `native` and `python`
spec.yaml: features.c.udf.native: no native udf `my_udf` is registered in this binary (registered: none)"##,
    ),
    (
        "unknown_dependency",
        r##"+  f:
    kind: on_demand
    entity: Txn
    dependencies: [tx]
    udf: {expr: {amount: "1.0"}}
"##,
        r##"spec.yaml: features.f.dependencies[0]: unknown feature `tx` (did you mean `txn`?)"##,
    ),
    (
        "unknown_entity",
        r##"+  p2:
    kind: pipeline
    entity: Tx
"##,
        r##"spec.yaml: features.p2.entity: unknown entity `Tx` (did you mean `Txn`?)"##,
    ),
    (
        "unknown_field",
        r##"+    colour: red
"##,
        r##"spec.yaml: features.txn: unknown field `colour`, expected one of `kind`, `entity`, `output`, `aggregate`, `description`, `dependencies`, `args`, `udf`, `history`, `ttl_s`, `source` at line 11 column 5"##,
    ),
    (
        "unknown_type",
        r##"version: 1
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: flaot, n: int, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
"##,
        r##"spec.yaml: entities.Txn.fields.amount: unknown type `flaot` (did you mean `float`?), expected string, int, float, bool, timestamp or list<T> at line 6 column 22"##,
    ),
    (
        "version_2",
        r##"version: 2
entities:
  Txn:
    keys: {user_id: string}
    timestamp: ts
    fields: {amount: float, n: int, label: string}
features:
  txn:
    kind: pipeline
    entity: Txn
"##,
        r##"spec.yaml: version: unsupported spec version 2 (expected 1)"##,
    ),
    (
        "cel_syntax_0",
        r##"version: 1
entities:
  T: {keys: {id: string}, timestamp: ts, fields: {amount: float}}
features:
  txn: {kind: pipeline, entity: T}
  f:
    kind: on_demand
    entity: T
    dependencies: [txn]
    udf: {expr: {amount: 'txn.amount *'}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: does not compile: the expression ends where a value is expected, at column 13 of `txn.amount *`"##,
    ),
    (
        "cel_syntax_1",
        r##"version: 1
entities:
  T: {keys: {id: string}, timestamp: ts, fields: {amount: float}}
features:
  txn: {kind: pipeline, entity: T}
  f:
    kind: on_demand
    entity: T
    dependencies: [txn]
    udf: {expr: {amount: 'size(txn'}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: does not compile: a `)` is missing, at column 9 of `size(txn`"##,
    ),
    (
        "cel_syntax_2",
        r##"version: 1
entities:
  T: {keys: {id: string}, timestamp: ts, fields: {amount: float}}
features:
  txn: {kind: pipeline, entity: T}
  f:
    kind: on_demand
    entity: T
    dependencies: [txn]
    udf: {expr: {amount: '"abc'}}
"##,
        r##"spec.yaml: features.f.udf.expr.amount: does not compile: a string that is never closed, at column 1 of `"abc`"##,
    ),
    (
        "source_mock_and_kafka",
        r##"+    source:
      mock: {items: [{user_id: a, amount: 1.0}]}
      kafka: {topic: txns}
"##,
        r##"spec.yaml: features.txn.source: give exactly one of `mock` and `kafka`"##,
    ),
    (
        "source_empty",
        r##"+    source: {}
"##,
        r##"spec.yaml: features.txn.source: give exactly one of `mock` and `kafka`"##,
    ),
    (
        "kafka_problems",
        r##"+    source:
      kafka:
        brokers: kafka
        topic: my txns
        group: ""
        dead_letter_topic: my txns
        batch: {max_records: 0, max_wait_ms: 120000}
        options: {group.id: g, enable.auto.commit: true, security.protocol: SASL_SSL}
"##,
        r##"spec.yaml: features.txn.source.kafka.brokers: `kafka` is not `host:port`: list the bootstrap servers as `host:port` separated by commas, such as `kafka-0:9092,kafka-1:9092`
spec.yaml: features.txn.source.kafka.topic: `my txns` is not a Kafka topic name: use 1 to 249 letters, digits, `.`, `_` or `-`
spec.yaml: features.txn.source.kafka.group: the consumer group may not be empty (leave `group` out for `oka-<feature>`)
spec.yaml: features.txn.source.kafka.dead_letter_topic: `my txns` is not a Kafka topic name: use 1 to 249 letters, digits, `.`, `_` or `-`
spec.yaml: features.txn.source.kafka.dead_letter_topic: the dead-letter topic is the topic read (`my txns`): its records would come back; name another topic
spec.yaml: features.txn.source.kafka.batch.max_records: max_records must be between 1 and 100000
spec.yaml: features.txn.source.kafka.batch.max_wait_ms: max_wait_ms must be at most 60000 (one minute)
spec.yaml: features.txn.source.kafka.options: Oka sets `group.id` itself: give it as `group`
spec.yaml: features.txn.source.kafka.options: Oka sets `enable.auto.commit` itself: it commits a batch's offsets only once the store has written the batch"##,
    ),
    (
        "kafka_brokers_empty",
        r##"+    source:
      kafka: {brokers: " , ", topic: txns, dead_letter_topic: txns}
"##,
        r##"spec.yaml: features.txn.source.kafka.brokers: list the bootstrap servers as `host:port` separated by commas, such as `kafka-0:9092,kafka-1:9092` (or leave `brokers` out and give them to `oka source kafka --brokers`)
spec.yaml: features.txn.source.kafka.dead_letter_topic: the dead-letter topic is the topic read (`txns`): its records would come back; name another topic"##,
    ),
    (
        "kafka_unknown_field",
        r##"+    source:
      kafka: {brokers: "kafka:9092", topik: txns}
"##,
        r##"spec.yaml: features.txn.source.kafka: unknown field `topik` (did you mean `topic`?), expected one of `brokers`, `topic`, `group`, `format`, `event_time`, `start`, `batch`, `dead_letter_topic`, `options` at line 12 column 38"##,
    ),
    (
        "kafka_format",
        r##"+    source:
      kafka: {topic: txns, format: avro}
"##,
        r##"spec.yaml: features.txn.source.kafka.format: unknown variant `avro`, expected `json` at line 12 column 36"##,
    ),
    (
        "kafka_event_time",
        r##"+    source:
      kafka: {topic: txns, event_time: produce}
"##,
        r##"spec.yaml: features.txn.source.kafka.event_time: unknown variant `produce`, expected `field` or `kafka` at line 12 column 40"##,
    ),
    (
        "kafka_option_value",
        r##"+    source:
      kafka: {topic: txns, options: {fetch.max.bytes: [1]}}
"##,
        r##"spec.yaml: features.txn.source.kafka.options.fetch.max.bytes: invalid type: a list, expected a string, number or bool such as `SASL_SSL` or `45000` at line 12 column 55"##,
    ),
    (
        "kafka_batch_shape",
        r##"+    source:
      kafka: {topic: txns, batch: 500}
"##,
        r##"spec.yaml: features.txn.source.kafka.batch: invalid type: integer `500`, expected a batch such as `{max_records: 500, max_wait_ms: 100}` at line 12 column 35"##,
    ),
];

#[test]
fn every_bad_spec_has_its_exact_human_message() {
    assert!(CASES.len() >= 25, "{} cases", CASES.len());
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
            assert!(line.starts_with("spec.yaml: "), "{name}: {line}");
        }
        for bad in FORBIDDEN {
            assert!(!got.contains(bad), "{name} shows `{bad}`: {got}");
        }
    }
}
