//! The Kafka source bench's producer (benches/kafka/run.sh):
//!
//! ```text
//! kafka_load BROKERS create TOPIC PARTITIONS
//! kafka_load BROKERS produce TOPIC COUNT [RATE]
//! ```
//!
//! `produce` sends COUNT records `{"id":"k<i mod 100000>","value":<i>}` round-robin over
//! the topic's partitions, as fast as the broker takes them, or paced at RATE records
//! per second (in 10 ms steps); each message's CreateTime is the moment it was handed
//! to the client, so the consumer's `oka_kafka_delivery_seconds` measures produce to
//! servable. It prints `produced N records in S s (R records/s)`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: kafka_load BROKERS create TOPIC PARTITIONS | kafka_load BROKERS produce TOPIC COUNT [RATE]";
    let (brokers, command, topic) = match &args[..] {
        [b, c, t, ..] => (b.as_str(), c.as_str(), t.as_str()),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let number = |i: usize| -> u64 {
        args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            eprintln!("{usage}");
            std::process::exit(2)
        })
    };
    match command {
        "create" => create(brokers, topic, i32::try_from(number(3)).unwrap()),
        "produce" => {
            let rate = (args.len() > 4).then(|| number(4));
            produce(brokers, topic, number(3), rate);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}

fn create(brokers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for r in rt
        .block_on(admin.create_topics([&new], &AdminOptions::new()))
        .unwrap()
    {
        r.map_err(|(t, e)| format!("creating {t}: {e}")).unwrap();
    }
    println!("created {topic} with {partitions} partitions");
}

fn produce(brokers: &str, topic: &str, count: u64, rate: Option<u64>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("acks", "all")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .unwrap();
    let start = Instant::now();
    let mut payload = String::with_capacity(64);
    for i in 0..count {
        if let Some(rate) = rate {
            // Paced in 10 ms steps: record i is due at i / rate seconds.
            let due = Duration::from_secs_f64(i as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(start.elapsed())
                && wait > Duration::from_millis(10)
            {
                producer.poll(Duration::ZERO);
                std::thread::sleep(wait);
            }
        }
        payload.clear();
        payload.push_str(&format!(r#"{{"id":"k{}","value":{i}}}"#, i % 100_000));
        let mut record = BaseRecord::<(), str>::to(topic).payload(payload.as_str());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    producer.poll(Duration::from_millis(5));
                    record = back;
                }
            }
        }
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    let s = start.elapsed().as_secs_f64();
    println!(
        "produced {count} records in {s:.2} s ({:.0} records/s)",
        count as f64 / s
    );
}
