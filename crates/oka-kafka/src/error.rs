//! Why a Kafka source could not start, and librdkafka's errors in words.

use rdkafka::error::KafkaError;

/// Why a Kafka source could not start, or stopped. Once running it stops only
/// when retrying cannot help (a store that refuses the writes for good, a lost
/// batch); other errors it logs, counts and retries.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaSourceError {
    /// Neither the spec nor the command line names the brokers.
    #[error(
        "feature `{feature}`: no Kafka brokers: give `brokers` in its `source.kafka`, or --brokers (OKA_KAFKA_BROKERS)"
    )]
    NoBrokers {
        /// The feature.
        feature: String,
    },
    /// `--brokers` is not a list of `host:port`.
    #[error(
        "--brokers `{0}`: list the bootstrap servers as `host:port` separated by commas, such as `kafka-0:9092,kafka-1:9092`"
    )]
    BadBrokers(String),
    /// librdkafka refused a setting, or could not create the client.
    #[error("feature `{feature}`: the Kafka {client} could not be created: {reason}")]
    Client {
        /// The feature.
        feature: String,
        /// `consumer` or `dead-letter producer`.
        client: &'static str,
        /// librdkafka's reason, in words.
        reason: String,
    },
    /// Subscribing to the topic failed.
    #[error("feature `{feature}`: subscribing to topic `{topic}` failed: {reason}")]
    Subscribe {
        /// The feature.
        feature: String,
        /// The topic.
        topic: String,
        /// librdkafka's reason, in words.
        reason: String,
    },
    /// A batch's write task ended without writing it (a bug): the source stops
    /// so that nothing after the batch is committed.
    #[error(
        "feature `{feature}`: a batch was lost before it was written ({why}); stopping without committing past it: restart the consumer, it resumes from the last commit"
    )]
    BatchLost {
        /// The feature.
        feature: String,
        /// `it panicked` or `it was cancelled`.
        why: &'static str,
    },
    /// The store refuses the writes for good (credentials, configuration, data
    /// it cannot take): retrying cannot help, so the source stops, committing
    /// nothing past the last batch the store took.
    #[error(
        "feature `{feature}`: {}; {}; stopped without committing past the last batch the store took: mend it and restart the consumer, it resumes from the last commit",
        error.message, error.kind.advice()
    )]
    StoreRefused {
        /// The feature.
        feature: String,
        /// The store's error.
        error: oka_storage::StoreError,
    },
}

/// A librdkafka error in words: its own description without Rust's names
/// (`unknown topic or partition`, not `UnknownTopicOrPartition (Broker: …)`).
pub fn reason(e: &KafkaError) -> String {
    if let KafkaError::ClientConfig(_, desc, key, value) = e {
        return if key.is_empty() {
            desc.clone()
        } else {
            format!("`{key}` = `{value}`: {desc}")
        };
    }
    if let KafkaError::ClientCreation(why) = e {
        return why.clone();
    }
    match e.rdkafka_error_code() {
        Some(code) => {
            let shown = code.to_string();
            let description = shown
                .split_once(" (")
                .map_or(shown.as_str(), |(_, d)| d.strip_suffix(')').unwrap_or(d));
            let bare = ["Local: ", "Broker: "]
                .iter()
                .find_map(|p| description.strip_prefix(p))
                .unwrap_or(description);
            let mut chars = bare.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_lowercase().chain(chars).collect::<String>()
            })
        }
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::error::RDKafkaErrorCode;
    use rdkafka::types::RDKafkaConfRes;

    use super::*;

    #[test]
    fn reasons_are_librdkafkas_words() {
        let e = KafkaError::MessageProduction(RDKafkaErrorCode::UnknownTopicOrPartition);
        assert_eq!(reason(&e), "unknown topic or partition");
        let e = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        assert_eq!(reason(&e), "message timed out");
        let e = KafkaError::ClientConfig(
            RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
            "No such configuration property: \"fetch.max.byte\"".into(),
            "fetch.max.byte".into(),
            "1".into(),
        );
        assert_eq!(
            reason(&e),
            "`fetch.max.byte` = `1`: No such configuration property: \"fetch.max.byte\""
        );
    }
}
