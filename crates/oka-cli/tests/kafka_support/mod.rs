//! What the Kafka source's tests share: a Kafka broker (OKA_TEST_KAFKA_BROKERS)
//! driven with librdkafka (topics, producing, committed offsets, watermarks),
//! a Redis server of a test's own that it can stop and start, `oka source
//! kafka` as a process, and reading the written records back through `oka serve`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::common::{OKA, free_port, http, service_url, start_oka, tmp_file};

/// The broker and the Redis URL of the environment, or `None` (the test skips;
/// it fails instead under OKA_REQUIRE_KAFKA=1 / OKA_REQUIRE_REDIS=1).
pub fn services() -> Option<(String, String)> {
    let kafka = service_url("OKA_TEST_KAFKA_BROKERS");
    let redis = service_url("OKA_TEST_REDIS_URL");
    Some((kafka?, redis?))
}

/// A name no other test or run uses: `{what}-{pid}-{nanos}`.
pub fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// Waits until `ok()` holds, failing with `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The spec of every test: feature `clicks` of entity `Click` from `topic`.
pub fn spec(topic: &str, group: &str, extra: &str) -> PathBuf {
    let yaml = format!(
        "version: 1
entities:
  Click: {{keys: {{id: string}}, timestamp: ts, fields: {{n: int}}}}
features:
  clicks:
    kind: pipeline
    entity: Click
    source:
      kafka: {{topic: {topic}, group: {group}, batch: {{max_records: 200, max_wait_ms: 50}}{extra}}}
"
    );
    tmp_file(&format!("{}.yaml", unique("kafka-spec")), &yaml)
}

/// A message read back: its value and its headers.
pub type Letter = (Vec<u8>, Vec<(String, String)>);

/// A Kafka broker.
pub struct Kafka {
    pub brokers: String,
}

impl Kafka {
    fn config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        c
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = self.config().create().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
        let results = rt
            .block_on(admin.create_topics([&new], &AdminOptions::new()))
            .unwrap();
        for r in results {
            r.unwrap();
        }
    }

    /// Produces `value` to partition 0 with `headers` (name, value) and waits
    /// until the broker has it.
    pub fn produce_with_headers(&self, topic: &str, value: &[u8], headers: &[(&str, &str)]) {
        let producer: BaseProducer = self.config().clone().set("acks", "all").create().unwrap();
        let mut owned = rdkafka::message::OwnedHeaders::new();
        for (name, v) in headers {
            owned = owned.insert(rdkafka::message::Header {
                key: name,
                value: Some(*v),
            });
        }
        let record = BaseRecord::<[u8], [u8]>::to(topic)
            .partition(0)
            .payload(value)
            .headers(owned);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.flush(Duration::from_secs(30)).unwrap();
    }

    /// Produces each `(partition, value)` and waits until the broker has them all.
    pub fn produce(&self, topic: &str, messages: &[(i32, Vec<u8>)]) {
        let producer: BaseProducer = self
            .config()
            .clone()
            .set("linger.ms", "5")
            .set("acks", "all")
            .create()
            .unwrap();
        for (partition, value) in messages {
            let mut record = BaseRecord::<[u8], [u8]>::to(topic)
                .partition(*partition)
                .payload(value.as_slice());
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        producer.poll(Duration::from_millis(10));
                        record = back;
                    }
                }
            }
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    }

    /// `clicks` records `from..to`: id `k{i}`, `n = i`, spread over `partitions`.
    pub fn produce_clicks(&self, topic: &str, from: usize, to: usize, partitions: i32) {
        let messages: Vec<(i32, Vec<u8>)> = (from..to)
            .map(|i| {
                let p = i32::try_from(i).unwrap() % partitions;
                (p, format!(r#"{{"id":"k{i}","n":{i}}}"#).into_bytes())
            })
            .collect();
        self.produce(topic, &messages);
    }

    fn consumer(&self, group: &str) -> BaseConsumer {
        self.config()
            .clone()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()
            .unwrap()
    }

    /// The group's committed offset of each partition (-1: none).
    pub fn committed(&self, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let got = self
            .consumer(group)
            .committed_offsets(tpl, Duration::from_secs(10))
            .unwrap();
        (0..partitions)
            .map(|p| match got.find_partition(topic, p).unwrap().offset() {
                Offset::Offset(o) => o,
                _ => -1,
            })
            .collect()
    }

    /// Each partition's high watermark (the offset the next message gets).
    pub fn ends(&self, topic: &str, partitions: i32) -> Vec<i64> {
        let c = self.consumer(&unique("watermarks"));
        (0..partitions)
            .map(|p| {
                c.fetch_watermarks(topic, p, Duration::from_secs(10))
                    .unwrap()
                    .1
            })
            .collect()
    }

    /// Every message of `topic` (one partition), with its headers, read from
    /// the start until `n` arrived.
    pub fn read(&self, topic: &str, n: usize) -> Vec<Letter> {
        use rdkafka::message::{Headers, Message};
        let c = self.consumer(&unique("reader"));
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)
            .unwrap();
        c.assign(&tpl).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while out.len() < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} messages in {topic}",
                out.len()
            );
            let Some(m) = c.poll(Duration::from_millis(200)) else {
                continue;
            };
            let m = m.unwrap();
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| {
                            let v = h.value.map(|v| String::from_utf8_lossy(v).into_owned());
                            (h.key.to_owned(), v.unwrap_or_default())
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push((m.payload().unwrap_or_default().to_vec(), headers));
        }
        out
    }
}

/// `oka source kafka` running, and its admin port.
pub struct Source {
    pub child: Child,
    pub admin: SocketAddr,
    pub log: PathBuf,
}

impl Drop for Source {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `oka source kafka --spec SPEC` on `store` with `--brokers`, logging to
/// a file; waits until its admin port answers (not until it joined: see
/// [`Source::wait_joined`]).
pub fn start_source(spec: &Path, brokers: &str, store: &str, prefix: &str) -> Source {
    start_source_with(spec, brokers, store, prefix, &[])
}

/// [`start_source`] with more flags.
pub fn start_source_with(
    spec: &Path,
    brokers: &str,
    store: &str,
    prefix: &str,
    extra: &[&str],
) -> Source {
    let port = free_port();
    let log = tmp_file(&format!("{}.log", unique("kafka-source")), "");
    let child = Command::new(OKA)
        .args(["source", "kafka", "--spec"])
        .arg(spec)
        .args([
            "--brokers",
            brokers,
            "--store",
            store,
            "--store-key-prefix",
            prefix,
        ])
        .args(["--admin-listen", &format!("127.0.0.1:{port}")])
        .args(["--stats-interval-ms", "500", "--retry-max-ms", "1000"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut s = Source {
        child,
        admin: format!("127.0.0.1:{port}").parse().unwrap(),
        log,
    };
    wait_for("the consumer's admin port", Duration::from_secs(60), || {
        assert!(
            s.child.try_wait().unwrap().is_none(),
            "oka source kafka exited:\n{}",
            s.log_text()
        );
        http(s.admin, "GET", "/healthz", "").is_some()
    });
    s
}

impl Source {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until every consumer joined its group.
    pub fn wait_joined(&mut self) {
        wait_for(
            "the consumer to join its group",
            Duration::from_secs(60),
            || {
                assert!(
                    self.child.try_wait().unwrap().is_none(),
                    "exited:\n{}",
                    self.log_text()
                );
                http(self.admin, "GET", "/readyz", "").map(|(s, _)| s) == Some(200)
            },
        );
    }

    /// The sum of the series of `name` whose labels contain `labels`.
    pub fn metric(&self, name: &str, labels: &str) -> f64 {
        let Some((200, body)) = http(self.admin, "GET", "/metrics", "") else {
            return 0.0;
        };
        body.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                    && l.contains(labels)
            })
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    /// Sends SIGTERM and waits for the exit; its status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        signal(&self.child, "TERM");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "no exit after SIGTERM:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Sends `SIG{sig}` to `child`.
pub fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {}", child.id());
}

/// A redis-server of a test's own on a fixed port, persisting every write
/// (`appendfsync always`), so that it can be killed and started again with
/// its data.
pub struct Redis {
    pub port: u16,
    dir: PathBuf,
    pub child: Option<Child>,
}

impl Redis {
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(unique("oka-kafka-redis"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = Self {
            port: free_port(),
            dir,
            child: None,
        };
        r.up();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) and waits until it answers.
    pub fn up(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (install it, or unset OKA_TEST_REDIS_URL to skip)");
        self.child = Some(child);
        let addr: SocketAddr = format!("127.0.0.1:{}", self.port).parse().unwrap();
        wait_for("redis-server", Duration::from_secs(20), || {
            std::net::TcpStream::connect(addr).is_ok()
        });
    }

    /// Kills the server (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads `k{i}` for every `i` in `ids` through `oka serve` on `store`; the
/// ids whose record is missing or does not hold `n = i`.
pub fn missing(spec: &Path, store: &str, prefix: &str, ids: std::ops::Range<usize>) -> Vec<usize> {
    let spec = spec.to_str().unwrap();
    let oka = start_oka(
        &[
            "--spec",
            spec,
            "--store",
            store,
            "--store-key-prefix",
            prefix,
        ],
        None,
    );
    let ids: Vec<usize> = ids.collect();
    let mut out = Vec::new();
    for chunk in ids.chunks(500) {
        let keys: Vec<String> = chunk
            .iter()
            .map(|i| format!(r#"{{"id":"k{i}"}}"#))
            .collect();
        let body = format!(
            r#"{{"target_features":["clicks"],"keys":[{}]}}"#,
            keys.join(",")
        );
        let (status, text) = http(oka.addr, "POST", "/v1/features", &body).unwrap();
        assert_eq!(status, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (i, got) in chunk.iter().zip(v["results"]["clicks"].as_array().unwrap()) {
            if got[0]["n"].as_u64() != Some(*i as u64) {
                out.push(*i);
            }
        }
    }
    out
}
