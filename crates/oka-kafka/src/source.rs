//! A spec's Kafka sources, how they run (the options that come from flags, not
//! the spec), and their librdkafka settings.

use std::sync::Arc;
use std::time::Duration;

use oka_core::feature::Source;
use oka_core::registry::FeatureKind;
use oka_core::spec::KafkaSourceSpec;
use oka_core::spec::kafka::bad_broker;
use oka_core::{Entity, FeatureId, Registry};
use oka_ingest::TimeBounds;
use oka_storage::StoreWatch;
use rdkafka::ClientConfig;

use crate::error::KafkaSourceError;

/// librdkafka's pre-fetch bound for the consumer queue unless `options` says
/// (KiB; librdkafka's own default is 64 MiB).
pub const QUEUED_KBYTES: &str = "16384";

/// A pipeline feature's Kafka source, found in a registry.
#[derive(Debug, Clone)]
pub struct KafkaSource {
    /// The feature.
    pub feature: FeatureId,
    /// Its name.
    pub name: Arc<str>,
    /// Its entity.
    pub entity: Arc<Entity>,
    /// The source as the spec declares it.
    pub spec: KafkaSourceSpec,
}

impl KafkaSource {
    /// Every Kafka source declared in `registry`, in spec order.
    pub fn all(registry: &Registry) -> Vec<Self> {
        registry
            .features()
            .iter()
            .filter_map(|f| match &f.kind {
                FeatureKind::Pipeline {
                    source: Some(Source::Kafka(spec)),
                    ..
                } => Some(Self {
                    feature: f.id,
                    name: Arc::clone(&f.name),
                    entity: Arc::clone(&f.entity),
                    spec: spec.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The bootstrap servers: `over` (the command line) if given, else the spec's.
    pub fn brokers(&self, over: Option<&str>) -> Result<String, KafkaSourceError> {
        match over.or(self.spec.brokers.as_deref()) {
            Some(b) if over.is_some() && bad_broker(b).is_some() => {
                Err(KafkaSourceError::BadBrokers(b.to_owned()))
            }
            Some(b) => Ok(b.to_owned()),
            None => Err(KafkaSourceError::NoBrokers {
                feature: self.name.to_string(),
            }),
        }
    }

    /// The spec's `options`, then the command line's (which win).
    fn options<'a>(&'a self, opts: &'a RunOptions) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.spec
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str()))
            .chain(opts.options.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// The consumer's settings: the spec's `options` (then the command line's)
    /// over Oka's defaults, then what Oka sets itself.
    pub fn consumer_config(&self, opts: &RunOptions) -> Result<ClientConfig, KafkaSourceError> {
        let mut c = ClientConfig::new();
        c.set("queued.max.messages.kbytes", QUEUED_KBYTES)
            .set(
                "statistics.interval.ms",
                opts.stats_interval.as_millis().to_string(),
            )
            .set("client.id", format!("{}-{}", opts.client_id, self.name));
        for (k, v) in self.options(opts) {
            c.set(k, v);
        }
        c.set("bootstrap.servers", self.brokers(opts.brokers.as_deref())?)
            .set("group.id", self.spec.group_or_default(&self.name))
            .set("auto.offset.reset", self.spec.start.name())
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false");
        if let Some(id) = &opts.instance_id {
            c.set("group.instance.id", format!("{id}-{}", self.name));
        }
        Ok(c)
    }

    /// The dead-letter producer's settings: the brokers and the spec's
    /// `options` (security settings apply to both clients).
    pub fn producer_config(&self, opts: &RunOptions) -> Result<ClientConfig, KafkaSourceError> {
        let mut c = ClientConfig::new();
        c.set("client.id", format!("{}-{}-dlq", opts.client_id, self.name))
            .set(
                "message.timeout.ms",
                crate::dead_letter::DELIVERY_TIMEOUT.as_millis().to_string(),
            );
        for (k, v) in self.options(opts) {
            if !CONSUMER_ONLY.iter().any(|p| k.starts_with(p)) {
                c.set(k, v);
            }
        }
        c.set("bootstrap.servers", self.brokers(opts.brokers.as_deref())?);
        Ok(c)
    }
}

/// Prefixes of consumer settings the producer would only warn about.
const CONSUMER_ONLY: [&str; 12] = [
    "fetch.",
    "queued.",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "max.poll.interval.ms",
    "partition.assignment.strategy",
    "group.",
    "isolation.level",
    "check.crcs",
    "auto.commit",
    "allow.auto.create.topics",
    "consume.",
];

/// How the consumers of a process run: flags and environment, not the spec.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Bootstrap servers overriding every source's `brokers`.
    pub brokers: Option<String>,
    /// librdkafka settings for every source, over the spec's `options`
    /// (credentials that do not belong in a spec, say).
    pub options: Vec<(String, String)>,
    /// The prefix of each client's `client.id` (`<prefix>-<feature>`).
    pub client_id: String,
    /// This process's stable name, for static group membership: each source's
    /// member is `<instance_id>-<feature>` (`group.instance.id`), so a restarted
    /// consumer resumes its partitions at once. `None`: dynamic membership.
    pub instance_id: Option<String>,
    /// Batches of one source being written at once; when all are busy and the
    /// next is full, fetching pauses.
    pub in_flight: usize,
    /// The first wait before writing a batch again after the write path gave
    /// up on it; doubles up to `retry_max`.
    pub retry_base: Duration,
    /// The longest wait between attempts at a batch.
    pub retry_max: Duration,
    /// How long a shutdown waits for the batches in flight to be written.
    pub shutdown_timeout: Duration,
    /// How often librdkafka reports the watermarks behind the lag gauges.
    pub stats_interval: Duration,
    /// The event-time bounds of records.
    pub bounds: TimeBounds,
    /// The store's state, shared by every source's writes: each outage is
    /// logged once, with its cause, however many batches wait on it.
    pub store_watch: Arc<StoreWatch>,
    /// Where the write spans of traced messages go (`--otlp-endpoint`); none:
    /// message headers are not read for trace context.
    pub tracer: Option<Arc<oka_telemetry::trace::Tracer>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            brokers: None,
            options: Vec::new(),
            client_id: "oka".to_owned(),
            instance_id: None,
            in_flight: 2,
            retry_base: Duration::from_millis(500),
            retry_max: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(30),
            stats_interval: Duration::from_secs(5),
            bounds: TimeBounds::default(),
            store_watch: Arc::new(StoreWatch::new("the store", "unknown")),
            tracer: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use oka_core::NativeUdfs;

    use super::*;

    fn sources(yaml_source: &str) -> Vec<KafkaSource> {
        let yaml = format!(
            "version: 1\nentities:\n  E: {{keys: {{id: string}}, timestamp: ts, fields: {{v: float}}}}\nfeatures:\n  p: {{kind: pipeline, entity: E, source: {yaml_source}}}\n  q: {{kind: pipeline, entity: E}}\n"
        );
        KafkaSource::all(&Registry::from_yaml("t", &yaml, &NativeUdfs::new()).unwrap())
    }

    #[test]
    fn settings_put_oka_last_and_the_command_line_first() {
        let s = sources(
            "{kafka: {brokers: 'k:1', topic: t, options: {queued.max.messages.kbytes: 99, security.protocol: SSL}}}",
        );
        assert_eq!(s.len(), 1);
        let c = s[0].consumer_config(&RunOptions::default()).unwrap();
        assert_eq!(c.get("bootstrap.servers"), Some("k:1"));
        assert_eq!(c.get("group.id"), Some("oka-p"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        assert_eq!(c.get("queued.max.messages.kbytes"), Some("99"));
        let over = RunOptions {
            brokers: Some("a:2,b:3".into()),
            options: vec![("security.protocol".into(), "SASL_SSL".into())],
            ..RunOptions::default()
        };
        assert_eq!(
            s[0].consumer_config(&over)
                .unwrap()
                .get("bootstrap.servers"),
            Some("a:2,b:3")
        );
        let p = s[0].producer_config(&over).unwrap();
        assert_eq!(
            p.get("security.protocol"),
            Some("SASL_SSL"),
            "the command line wins"
        );
        assert_eq!(p.get("queued.max.messages.kbytes"), None);
    }

    #[test]
    fn brokers_come_from_somewhere_or_the_error_says_where() {
        let s = sources("{kafka: {topic: t}}");
        let e = s[0].brokers(None).unwrap_err().to_string();
        assert!(e.contains("--brokers"), "{e}");
        assert_eq!(s[0].brokers(Some("x:1")).unwrap(), "x:1");
        let e = s[0].brokers(Some("x")).unwrap_err().to_string();
        assert!(e.contains("`x`"), "{e}");
        assert!(sources("{mock: {items: [{id: a}]}}").is_empty());
    }
}
