//! One Kafka message → a record of the feature's entity, through the same
//! parser as `oka ingest` and `POST /v1/ingest`, or a rejection with its reason.

use oka_core::spec::EventTimeSpec;
use oka_core::{EntityKey, Row, Timestamp, Value};
use oka_ingest::RecordParser;
use oka_ingest::record::RecordError;

/// Why a message is not a record: the `reason` label of
/// `oka_kafka_records_rejected_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No value (a tombstone) or an empty one.
    Empty,
    /// Not JSON, or JSON but not one object.
    NotJson,
    /// A field the entity does not declare.
    UnknownField,
    /// A key field absent or null.
    MissingKey,
    /// A value of the wrong type or out of bounds.
    BadValue,
    /// An event time further ahead than the allowed clock skew.
    TooFarAhead,
}

impl Reason {
    /// Every reason, in label order.
    pub const ALL: [Self; 6] = [
        Self::Empty,
        Self::NotJson,
        Self::UnknownField,
        Self::MissingKey,
        Self::BadValue,
        Self::TooFarAhead,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::NotJson => "not_json",
            Self::UnknownField => "unknown_field",
            Self::MissingKey => "missing_key",
            Self::BadValue => "bad_value",
            Self::TooFarAhead => "too_far_ahead",
        }
    }

    fn of(e: &RecordError) -> Self {
        match e {
            RecordError::NotAnObject(_) => Self::NotJson,
            RecordError::UnknownField { .. } => Self::UnknownField,
            RecordError::MissingKey(_) => Self::MissingKey,
            RecordError::TooFarAhead { .. } => Self::TooFarAhead,
            _ => Self::BadValue,
        }
    }
}

/// A message that is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The label.
    pub reason: Reason,
    /// What is wrong, in words (user data shown safely).
    pub message: String,
}

/// Decodes messages of one source.
#[derive(Debug)]
pub struct Decoder<'e> {
    /// The entity's record parser (its `now` bounds future event times).
    pub parser: RecordParser<'e>,
    /// Where event times come from.
    pub event_time: EventTimeSpec,
    /// The wall-clock time standing in for a missing Kafka timestamp.
    pub now: Timestamp,
}

impl Decoder<'_> {
    /// The record in `payload`; `kafka_ms` is the message's timestamp, if any.
    pub fn decode(
        &self,
        payload: Option<&[u8]>,
        kafka_ms: Option<i64>,
    ) -> Result<(EntityKey, Row), Rejection> {
        let Some(payload) = payload.filter(|p| !p.is_empty()) else {
            return Err(Rejection {
                reason: Reason::Empty,
                message: "the message has no value (a tombstone or an empty message); expected a JSON object of the entity's fields".to_owned(),
            });
        };
        let kafka_time = kafka_ms
            .and_then(|ms| ms.checked_mul(1000))
            .map_or(self.now, Timestamp);
        let (key, row) = self
            .parser
            .parse_json_at(payload, kafka_time)
            .map_err(|e| Rejection {
                reason: Reason::of(&e),
                message: e.to_string(),
            })?;
        if self.event_time == EventTimeSpec::Kafka && row.event_time != kafka_time {
            let entity = self.parser.entity();
            let mut columns = row.columns.to_vec();
            if let Some(ts) = columns.get_mut(entity.timestamp_index) {
                *ts = Value::Timestamp(kafka_time);
            }
            return Ok((key, Row::new(kafka_time, columns)));
        }
        Ok((key, row))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use oka_core::{NativeUdfs, Registry};
    use oka_ingest::TimeBounds;

    use super::*;

    const NOW: Timestamp = Timestamp(1_800_000_000_000_000);

    fn entity() -> Arc<oka_core::Entity> {
        let yaml = "version: 1\nentities:\n  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}\nfeatures:\n  p: {kind: pipeline, entity: E}\n";
        let r = Registry::from_yaml("t", yaml, &NativeUdfs::new()).unwrap();
        Arc::clone(&r.features()[0].entity)
    }

    fn decode(
        event_time: EventTimeSpec,
        payload: Option<&[u8]>,
        ms: Option<i64>,
    ) -> Result<(EntityKey, Row), Rejection> {
        let e = entity();
        let d = Decoder {
            parser: RecordParser::new(&e, NOW, &TimeBounds::default()),
            event_time,
            now: NOW,
        };
        d.decode(payload, ms)
    }

    #[test]
    fn event_times_come_from_the_field_else_kafka() {
        let kafka = Some(1_799_999_000_000);
        let (_, row) = decode(EventTimeSpec::Field, Some(br#"{"id":"a","ts":5}"#), kafka).unwrap();
        assert_eq!(row.event_time, Timestamp(5_000_000));
        let (_, row) = decode(EventTimeSpec::Field, Some(br#"{"id":"a"}"#), kafka).unwrap();
        assert_eq!(row.event_time, Timestamp(1_799_999_000_000_000));
        let (_, row) = decode(EventTimeSpec::Field, Some(br#"{"id":"a"}"#), None).unwrap();
        assert_eq!(row.event_time, NOW, "no Kafka timestamp: now");
        let (_, row) = decode(EventTimeSpec::Kafka, Some(br#"{"id":"a","ts":5}"#), kafka).unwrap();
        assert_eq!(row.event_time, Timestamp(1_799_999_000_000_000));
        assert_eq!(row.columns[1], Value::Timestamp(row.event_time));
    }

    #[test]
    fn rejections_have_a_reason_and_words() {
        let cases: [(&[u8], Reason, &str); 5] = [
            (b"", Reason::Empty, "no value"),
            (b"{not json", Reason::NotJson, "not a JSON object"),
            (
                br#"{"id":"a","colour":1}"#,
                Reason::UnknownField,
                "no field `colour`",
            ),
            (
                br#"{"v":1.0}"#,
                Reason::MissingKey,
                "missing key field `id`",
            ),
            (br#"{"id":"a","v":"x"}"#, Reason::BadValue, "field `v`"),
        ];
        for (payload, reason, words) in cases {
            let r = decode(EventTimeSpec::Field, Some(payload), None).unwrap_err();
            assert_eq!(r.reason, reason, "{r:?}");
            assert!(r.message.contains(words), "{}", r.message);
        }
        let r = decode(EventTimeSpec::Field, None, None).unwrap_err();
        assert_eq!(r.reason, Reason::Empty);
        let r = decode(
            EventTimeSpec::Field,
            Some(br#"{"id":"a","ts":9999999999}"#),
            None,
        );
        assert_eq!(r.unwrap_err().reason, Reason::TooFarAhead);
    }
}
