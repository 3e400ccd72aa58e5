//! The dead-letter topic: rejected messages produced unchanged (key and value),
//! with headers saying where each came from and why.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tracing::warn;

use crate::batch::Rejected;
use crate::error::{KafkaSourceError, reason};

/// How long a dead letter may wait for the broker, all retries included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// A producer for one source's dead-letter topic.
pub struct DeadLetters {
    producer: FutureProducer,
    topic: String,
    origin: String,
    feature: String,
}

impl std::fmt::Debug for DeadLetters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetters")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl DeadLetters {
    /// A producer of `topic` with `config` (the brokers and the source's
    /// options), for messages of `origin` consumed into `feature`.
    pub fn new(
        config: &ClientConfig,
        topic: &str,
        origin: &str,
        feature: &str,
    ) -> Result<Self, KafkaSourceError> {
        let producer = config.create().map_err(|e| KafkaSourceError::Client {
            feature: feature.to_owned(),
            client: "dead-letter producer",
            reason: reason(&e),
        })?;
        Ok(Self {
            producer,
            topic: topic.to_owned(),
            origin: origin.to_owned(),
            feature: feature.to_owned(),
        })
    }

    /// Produces `r`; false (logged) when the topic did not take it in time.
    pub async fn send(&self, r: &Rejected) -> bool {
        let partition = r.partition.to_string();
        let offset = r.offset.to_string();
        let headers = OwnedHeaders::new_with_capacity(5)
            .insert(header("oka.topic", &self.origin))
            .insert(header("oka.partition", &partition))
            .insert(header("oka.offset", &offset))
            .insert(header("oka.feature", &self.feature))
            .insert(header("oka.error", &r.rejection.message));
        let mut record = FutureRecord::<[u8], [u8]>::to(&self.topic).headers(headers);
        if let Some(key) = &r.key {
            record = record.key(key.as_slice());
        }
        if let Some(payload) = &r.payload {
            record = record.payload(payload.as_slice());
        }
        match self.producer.send(record, DELIVERY_TIMEOUT).await {
            Ok(_) => true,
            Err((e, _)) => {
                warn!(
                    feature = %self.feature,
                    topic = %self.origin,
                    partition = r.partition,
                    offset = r.offset,
                    dead_letter_topic = %self.topic,
                    error = %reason(&e),
                    "the dead-letter topic did not take a rejected message; it is skipped (its offset is logged here)"
                );
                false
            }
        }
    }
}

fn header<'a>(key: &'a str, value: &'a str) -> Header<'a, &'a str> {
    Header {
        key,
        value: Some(value),
    }
}
