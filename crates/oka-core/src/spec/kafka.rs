//! `source: {kafka: …}`: a pipeline feature fed from a Kafka topic. These types
//! only mirror the file; the loader checks them and `oka source kafka` runs them.

use std::fmt;
use std::time::Duration;

use indexmap::IndexMap;
use serde::de::{Error, Visitor};
use serde::{Deserialize, Serialize};

use super::de::unique;

/// Records per batch unless `batch.max_records` says.
pub const DEFAULT_MAX_RECORDS: usize = 500;
/// How long a batch waits for more records unless `batch.max_wait_ms` says.
pub const DEFAULT_MAX_WAIT_MS: u64 = 100;
/// The largest `batch.max_records`.
pub const MAX_MAX_RECORDS: usize = 100_000;
/// The largest `batch.max_wait_ms` (one minute).
pub const MAX_MAX_WAIT_MS: u64 = 60_000;

/// librdkafka settings Oka sets itself, with the spec field that says what they
/// would (`None`: Oka needs it as it is).
pub const RESERVED_OPTIONS: [(&str, Option<&str>); 8] = [
    ("bootstrap.servers", Some("brokers")),
    ("metadata.broker.list", Some("brokers")),
    ("group.id", Some("group")),
    ("auto.offset.reset", Some("start")),
    ("enable.auto.commit", None),
    ("enable.auto.offset.store", None),
    ("enable.partition.eof", None),
    ("group.instance.id", Some("oka source kafka --instance-id")),
];

/// A Kafka topic consumed into a pipeline feature, at least once.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a Kafka source such as `{brokers: \"kafka:9092\", topic: clicks}`"
)]
pub struct KafkaSourceSpec {
    /// The bootstrap servers, `host:port[,host:port…]`; may be left out and given
    /// when the consumer starts (`oka source kafka --brokers`), which also
    /// overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brokers: Option<String>,
    /// The topic read.
    pub topic: String,
    /// The consumer group (default `oka-<feature>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The messages' format.
    #[serde(default)]
    pub format: KafkaFormat,
    /// Where a record's event time comes from.
    #[serde(default)]
    pub event_time: EventTimeSpec,
    /// Where a group without committed offsets starts.
    #[serde(default)]
    pub start: StartSpec,
    /// How records are grouped into store writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<KafkaBatchSpec>,
    /// A topic that receives every record that could not be used, with headers
    /// naming where it came from and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_topic: Option<String>,
    /// More librdkafka settings (`security.protocol`, `sasl.mechanism`,
    /// `fetch.max.bytes`, …), passed as they are.
    #[serde(
        default,
        deserialize_with = "unique",
        skip_serializing_if = "IndexMap::is_empty"
    )]
    pub options: IndexMap<String, OptionValue>,
}

impl KafkaSourceSpec {
    /// The consumer group of the source of `feature`.
    pub fn group_or_default(&self, feature: &str) -> String {
        self.group
            .clone()
            .unwrap_or_else(|| format!("oka-{feature}"))
    }

    /// Records per batch.
    pub fn max_records(&self) -> usize {
        self.batch
            .as_ref()
            .and_then(|b| b.max_records)
            .unwrap_or(DEFAULT_MAX_RECORDS)
    }

    /// How long a batch waits for more records after its first.
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(
            self.batch
                .as_ref()
                .and_then(|b| b.max_wait_ms)
                .unwrap_or(DEFAULT_MAX_WAIT_MS),
        )
    }
}

/// The format of a message's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KafkaFormat {
    /// One JSON object of the entity's fields, as `oka ingest` reads them.
    #[default]
    Json,
}

/// Where a record's event time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTimeSpec {
    /// The entity's timestamp field; a record without one gets the message's
    /// Kafka timestamp.
    #[default]
    Field,
    /// The message's Kafka timestamp (create or log-append time), whatever the
    /// record says.
    Kafka,
}

/// Where a consumer group without committed offsets starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StartSpec {
    /// The oldest message the topic still holds.
    #[default]
    Earliest,
    /// Messages produced after the group first joined.
    Latest,
}

impl StartSpec {
    /// librdkafka's `auto.offset.reset` value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Earliest => "earliest",
            Self::Latest => "latest",
        }
    }
}

/// Batching of a Kafka source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a batch such as `{max_records: 500, max_wait_ms: 100}`"
)]
pub struct KafkaBatchSpec {
    /// Records per store write (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_records: Option<usize>,
    /// Milliseconds a batch waits for more records after its first (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
}

/// A librdkafka setting's value: YAML's string, number or bool, kept as text
/// (librdkafka takes every setting as a string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct OptionValue(pub String);

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for OptionValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OptionVisitor)
    }
}

struct OptionVisitor;

impl Visitor<'_> for OptionVisitor {
    type Value = OptionValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number or bool such as `SASL_SSL` or `45000`")
    }

    fn visit_str<E: Error>(self, s: &str) -> Result<OptionValue, E> {
        Ok(OptionValue(s.to_owned()))
    }

    fn visit_bool<E: Error>(self, b: bool) -> Result<OptionValue, E> {
        Ok(OptionValue(b.to_string()))
    }

    fn visit_i64<E: Error>(self, n: i64) -> Result<OptionValue, E> {
        Ok(OptionValue(n.to_string()))
    }

    fn visit_u64<E: Error>(self, n: u64) -> Result<OptionValue, E> {
        Ok(OptionValue(n.to_string()))
    }

    fn visit_f64<E: Error>(self, n: f64) -> Result<OptionValue, E> {
        Ok(OptionValue(n.to_string()))
    }
}

/// Whether `name` is a legal Kafka topic name: 1 to 249 of `[A-Za-z0-9._-]`, not
/// `.` or `..`.
pub fn is_topic_name(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The first entry of a `brokers` list that is not `host:port`, if any (an empty
/// list gives `Some("")`).
pub fn bad_broker(brokers: &str) -> Option<&str> {
    let entries: Vec<&str> = brokers.split(',').map(str::trim).collect();
    if entries.iter().all(|e| e.is_empty()) {
        return Some("");
    }
    entries.into_iter().find(|e| {
        let Some((host, port)) = e.rsplit_once(':') else {
            return true;
        };
        host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka() {
        for good in ["clicks", "a.b_c-D9", &"x".repeat(249)] {
            assert!(is_topic_name(good), "{good}");
        }
        for bad in ["", ".", "..", "my topic", "tópico", &"x".repeat(250)] {
            assert!(!is_topic_name(bad), "{bad}");
        }
    }

    #[test]
    fn brokers_are_host_port_lists() {
        assert_eq!(bad_broker("kafka:9092"), None);
        assert_eq!(bad_broker("a:1, b:2"), None);
        assert_eq!(bad_broker("[::1]:9092"), None);
        assert_eq!(bad_broker("kafka"), Some("kafka"));
        assert_eq!(bad_broker("a:1,b:x"), Some("b:x"));
        assert_eq!(bad_broker("a:0"), Some("a:0"));
        assert_eq!(bad_broker(" , "), Some(""));
        assert_eq!(bad_broker(":9092"), Some(":9092"));
    }
}
