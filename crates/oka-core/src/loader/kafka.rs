//! A pipeline feature's `source`: exactly one kind, and a Kafka source's
//! settings checked where the spec can (names, addresses, bounds; librdkafka's
//! own `options` are checked by the consumer when it starts).

use crate::feature::Source;
use crate::spec::kafka::{
    MAX_MAX_RECORDS, MAX_MAX_WAIT_MS, RESERVED_OPTIONS, bad_broker, is_topic_name,
};
use crate::spec::{KafkaSourceSpec, SourceSpec};

use super::Loader;

impl Loader {
    /// The source of feature `name`, if exactly one kind is given.
    pub(super) fn source(&mut self, name: &str, spec: &SourceSpec) -> Option<Source> {
        match (&spec.mock, &spec.kafka) {
            (Some(mock), None) => Some(Source::Mock(mock.clone())),
            (None, Some(kafka)) => Some(Source::Kafka(kafka.clone())),
            _ => {
                self.err(
                    format!("features.{name}.source"),
                    "give exactly one of `mock` and `kafka`",
                );
                None
            }
        }
    }

    /// Checks the Kafka source at `path`.
    pub(super) fn check_kafka(&mut self, path: &str, src: &KafkaSourceSpec) {
        if let Some(brokers) = &src.brokers {
            match bad_broker(brokers) {
                Some("") => self.err(
                    format!("{path}.brokers"),
                    "list the bootstrap servers as `host:port` separated by commas, such as `kafka-0:9092,kafka-1:9092` (or leave `brokers` out and give them to `oka source kafka --brokers`)",
                ),
                Some(bad) => self.err(
                    format!("{path}.brokers"),
                    format!(
                        "`{bad}` is not `host:port`: list the bootstrap servers as `host:port` separated by commas, such as `kafka-0:9092,kafka-1:9092`"
                    ),
                ),
                None => {}
            }
        }
        self.check_topic(&format!("{path}.topic"), &src.topic);
        if src.group.as_ref().is_some_and(|g| g.trim().is_empty()) {
            self.err(
                format!("{path}.group"),
                "the consumer group may not be empty (leave `group` out for `oka-<feature>`)",
            );
        }
        if let Some(dlq) = &src.dead_letter_topic {
            self.check_topic(&format!("{path}.dead_letter_topic"), dlq);
            if *dlq == src.topic {
                self.err(
                    format!("{path}.dead_letter_topic"),
                    format!(
                        "the dead-letter topic is the topic read (`{dlq}`): its records would come back; name another topic"
                    ),
                );
            }
        }
        if let Some(batch) = &src.batch {
            if batch
                .max_records
                .is_some_and(|n| !(1..=MAX_MAX_RECORDS).contains(&n))
            {
                self.err(
                    format!("{path}.batch.max_records"),
                    format!("max_records must be between 1 and {MAX_MAX_RECORDS}"),
                );
            }
            if batch.max_wait_ms.is_some_and(|ms| ms > MAX_MAX_WAIT_MS) {
                self.err(
                    format!("{path}.batch.max_wait_ms"),
                    format!("max_wait_ms must be at most {MAX_MAX_WAIT_MS} (one minute)"),
                );
            }
        }
        for name in src.options.keys() {
            if let Some((_, field)) = RESERVED_OPTIONS.iter().find(|(n, _)| n == name) {
                let why = match field {
                    Some(field) => format!("give it as `{field}`"),
                    None => {
                        "it commits a batch's offsets only once the store has written the batch"
                            .to_owned()
                    }
                };
                self.err(
                    format!("{path}.options"),
                    format!("Oka sets `{name}` itself: {why}"),
                );
            }
        }
    }

    fn check_topic(&mut self, path: &str, topic: &str) {
        if !is_topic_name(topic) {
            self.err(
                path,
                format!(
                    "`{topic}` is not a Kafka topic name: use 1 to 249 letters, digits, `.`, `_` or `-`"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::feature::{FeatureKind, Source};
    use crate::spec::{EventTimeSpec, StartSpec};
    use crate::{NativeUdfs, Registry};

    const SPEC: &str = r#"version: 1
entities:
  Txn: {keys: {user_id: string}, timestamp: ts, fields: {amount: float}}
features:
  txn:
    kind: pipeline
    entity: Txn
    source:
      kafka:
        topic: txns
        options: {fetch.max.bytes: 1048576, check.crcs: true, security.protocol: PLAINTEXT}
  mocked:
    kind: pipeline
    entity: Txn
    source: {mock: {items: [{user_id: a, amount: 1.0}]}}
"#;

    #[test]
    fn a_kafka_source_loads_with_its_defaults_beside_a_mock_one() {
        let r = Registry::from_yaml("s", SPEC, &NativeUdfs::new()).unwrap();
        let FeatureKind::Pipeline {
            source: Some(Source::Kafka(k)),
            ..
        } = &r.features()[0].kind
        else {
            panic!("txn has a kafka source: {:?}", r.features()[0].kind);
        };
        assert_eq!(k.group_or_default("txn"), "oka-txn");
        assert_eq!(k.brokers, None);
        assert_eq!(k.event_time, EventTimeSpec::Field);
        assert_eq!(k.start, StartSpec::Earliest);
        assert_eq!(k.max_records(), 500);
        assert_eq!(k.max_wait(), Duration::from_millis(100));
        let opts: Vec<(&str, &str)> = k
            .options
            .iter()
            .map(|(n, v)| (n.as_str(), v.0.as_str()))
            .collect();
        assert_eq!(
            opts,
            [
                ("fetch.max.bytes", "1048576"),
                ("check.crcs", "true"),
                ("security.protocol", "PLAINTEXT")
            ]
        );
        assert!(matches!(
            &r.features()[1].kind,
            FeatureKind::Pipeline {
                source: Some(Source::Mock(_)),
                ..
            }
        ));
    }
}
