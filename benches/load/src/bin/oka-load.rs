//! `oka-load`: a keep-alive HTTP/1.1 load generator for `POST /v1/features`.
//!
//! - Closed loop (default): each of `--connections` connections sends its next request
//!   as soon as the previous answer arrived, for `--duration` seconds.
//! - Open loop (`--rate R`): request `k` is scheduled at `start + k/R` and goes out on
//!   connection `k mod N`. Latency is measured from the *scheduled* send time, so a
//!   stalled server is charged for the requests it delayed (no coordinated omission).
//!
//! The client speaks hand-written HTTP/1.1 over `tokio::net::TcpStream` (one request in
//! flight per connection). It prints one JSON report to stdout.
//!
//! `--body-template` sends another server's request body instead of Oka's (the peer
//! benchmark in `benches/peers/` drives Feast's `POST /get-online-features` with it).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

#[derive(Debug, Parser)]
#[command(about = "Load generator for Oka's POST /v1/features")]
struct Args {
    /// Server address (IP:port).
    #[arg(long, default_value = "127.0.0.1:1122")]
    addr: SocketAddr,
    /// Request path.
    #[arg(long, default_value = "/v1/features")]
    path: String,
    /// Concurrent keep-alive connections.
    #[arg(long, short = 'c', default_value_t = 16)]
    connections: usize,
    /// Run length in seconds.
    #[arg(long, short = 'd', default_value_t = 5.0)]
    duration: f64,
    /// Open loop: total requests per second, at fixed intervals. Omit for closed loop.
    #[arg(long)]
    rate: Option<f64>,
    /// Key space: keys are `test-id-<0..keys>`, drawn at random.
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
    /// Keys per request.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Target feature (`simple_feature`, or `chained_feature`, which adds a second
    /// UDF on top of it).
    #[arg(long, default_value = "simple_feature")]
    feature: String,
    /// The target is the ceiling server (only labels the report; same requests).
    #[arg(long)]
    ceiling: bool,
    /// Report CPU seconds used by this process (the server) during the run.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Scenario label copied into the report.
    #[arg(long, default_value = "")]
    label: String,
    /// Send this body instead of Oka's: every `{key}` becomes one random key
    /// (`test-id-<k>`, the same key for each `{key}` in a request; needs `--batch 1`),
    /// and every `{keys}` becomes `--batch` random keys as a comma-separated list of
    /// JSON strings. E.g. Feast's
    /// `{"features":["simple_feature:value"],"entities":{"id":["{key}"],"multiplier":[2.0]}}`
    /// with `--path /get-online-features`. `--feature` is then only a label.
    #[arg(long)]
    body_template: Option<String>,
}

/// Seconds per clock tick of /proc/<pid>/stat utime/stime: assumes CLK_TCK = 100
/// (the Linux default; `getconf CLK_TCK`).
const SECONDS_PER_TICK: f64 = 0.01;

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the `(comm)` start at field 3 (state); utime is 14, stime 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11).context("no utime")?.parse()?;
    let stime: u64 = fields.get(12).context("no stime")?.parse()?;
    #[allow(clippy::cast_precision_loss)]
    Ok((utime + stime) as f64 * SECONDS_PER_TICK)
}

/// xorshift64*: cheap per-connection randomness for key choice.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Fills `--body-template`: `{key}` with one random key, `{keys}` with `--batch` of them.
fn fill_template(template: &str, args: &Args, rng: &mut Rng) -> String {
    use std::fmt::Write as _;
    let mut body = String::with_capacity(template.len() + args.batch * 24);
    let mut rest = template;
    let mut key: Option<u64> = None;
    while let Some(at) = rest.find('{') {
        body.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("{keys}") {
            for i in 0..args.batch {
                if i > 0 {
                    body.push(',');
                }
                let _ = write!(body, "\"test-id-{}\"", rng.below(args.keys));
            }
            rest = after;
        } else if let Some(after) = tail.strip_prefix("{key}") {
            let k = *key.get_or_insert_with(|| rng.below(args.keys));
            let _ = write!(body, "test-id-{k}");
            rest = after;
        } else {
            body.push('{');
            rest = &tail[1..];
        }
    }
    body.push_str(rest);
    body
}

/// Writes one full request (head and body) into `out`.
fn build_request(out: &mut Vec<u8>, args: &Args, rng: &mut Rng) {
    use std::fmt::Write as _;
    if let Some(template) = args.body_template.as_deref() {
        let body = fill_template(template, args, rng);
        write_request(out, args, &body);
        return;
    }
    let mut body = String::with_capacity(64 + args.batch * 24);
    let _ = write!(
        body,
        "{{\"target_features\":[\"{}\"],\"keys\":[",
        args.feature
    );
    for i in 0..args.batch {
        if i > 0 {
            body.push(',');
        }
        let _ = write!(body, "{{\"id\":\"test-id-{}\"}}", rng.below(args.keys));
    }
    // The multiplier is `simple_feature`'s argument; features chained on it
    // (`chained_feature`) see it too.
    body.push_str("],\"udf_args\":{\"simple_feature\":{\"multiplier\":2.0}}}");
    write_request(out, args, &body);
}

/// Writes the request head for `body`, then `body`, into `out`.
fn write_request(out: &mut Vec<u8>, args: &Args, body: &str) {
    use std::fmt::Write as _;
    out.clear();
    let _ = write!(
        VecWriter(out),
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        args.path,
        args.addr,
        body.len()
    );
    out.extend_from_slice(body.as_bytes());
}

struct VecWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for VecWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// One keep-alive connection with a read buffer.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(16 * 1024),
        })
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("connection closed");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Sends `req`, reads one response; returns its status code.
    async fn round_trip(&mut self, req: &[u8]) -> anyhow::Result<u16> {
        self.stream.write_all(req).await?;
        let head_end = loop {
            if let Some(p) = find(&self.buf, b"\r\n\r\n") {
                break p + 4;
            }
            self.fill().await?;
        };
        let head = std::str::from_utf8(&self.buf[..head_end])?;
        let status: u16 = head
            .split(' ')
            .nth(1)
            .context("no status")?
            .parse()
            .context("bad status")?;
        let mut length = None;
        let mut chunked = false;
        let mut close = false;
        for line in head.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>()?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        self.buf.drain(..head_end);
        if let Some(len) = length {
            while self.buf.len() < len {
                self.fill().await?;
            }
            self.buf.drain(..len);
        } else if chunked {
            loop {
                let line_end = loop {
                    if let Some(p) = find(&self.buf, b"\r\n") {
                        break p;
                    }
                    self.fill().await?;
                };
                let size_str = std::str::from_utf8(&self.buf[..line_end])?;
                let size_str = size_str.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_str, 16).context("bad chunk size")?;
                let total = line_end + 2 + size + 2;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                self.buf.drain(..total);
                if size == 0 {
                    break; // no trailers expected
                }
            }
        } else {
            bail!("response without length");
        }
        if close {
            bail!("server closed the connection (status {status})");
        }
        Ok(status)
    }
}

#[derive(Debug)]
struct ConnResult {
    hist: Histogram<u64>,
    requests: u64,
    errors: u64,
    transport_errors: u64,
}

/// Drives one connection: closed loop until `end`, or (open loop) one request per
/// scheduled send time received on `schedule`, until the pacer closes it.
async fn drive(
    args: std::sync::Arc<Args>,
    seed: u64,
    end: Instant,
    mut schedule: Option<mpsc::UnboundedReceiver<Instant>>,
) -> anyhow::Result<ConnResult> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut req = Vec::with_capacity(256);
    let (mut requests, mut errors, mut transport_errors) = (0u64, 0u64, 0u64);
    let mut conn: Option<Conn> = None;
    loop {
        let intended = match schedule.as_mut() {
            Some(rx) => match rx.recv().await {
                Some(at) => at,
                None => break,
            },
            None => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                now
            }
        };
        build_request(&mut req, &args, &mut rng);
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Conn::connect(args.addr).await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    requests += 1;
                    errors += 1;
                    transport_errors += 1;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let outcome = c.round_trip(&req).await;
        #[allow(clippy::cast_possible_truncation)]
        let us = intended.elapsed().as_micros() as u64;
        requests += 1;
        hist.saturating_record(us.max(1));
        match outcome {
            Ok(200) => {}
            Ok(_) => errors += 1,
            Err(_) => {
                errors += 1;
                transport_errors += 1;
                conn = None;
            }
        }
    }
    Ok(ConnResult {
        hist,
        requests,
        errors,
        transport_errors,
    })
}

fn ms(hist: &Histogram<u64>, q: f64) -> f64 {
    #[allow(clippy::cast_precision_loss)]
    let us = hist.value_at_quantile(q) as f64;
    (us / 1000.0 * 1000.0).round() / 1000.0
}

/// The open-loop pacer's shortest sleep.
const PACER_TICK: Duration = Duration::from_micros(100);

fn main() -> anyhow::Result<()> {
    let args = std::sync::Arc::new(Args::parse());
    if args.connections == 0 || args.duration <= 0.0 {
        bail!("--connections and --duration must be positive");
    }
    if let Some(t) = args.body_template.as_deref()
        && t.contains("{key}")
        && args.batch != 1
    {
        bail!("--body-template with {{key}} needs --batch 1 (use {{keys}} for batches)");
    }
    // The generator itself: one thread, so it takes at most one core away from the server.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let pid = args.server_pid.map(|p| p.to_string());
    let cpu_before = pid.as_deref().map(cpu_seconds).transpose()?;
    let self_before = cpu_seconds("self")?;
    let duration = Duration::from_secs_f64(args.duration);
    let n = args.connections;
    let start = Instant::now() + Duration::from_millis(20);
    let end = start + duration;
    // Open loop: a pacer thread (std::thread::sleep is precise to tens of µs, tokio's
    // timer only to 1 ms) hands request k's scheduled time to connection k mod N. A busy
    // connection queues it, and its latency still counts from the scheduled time.
    // The pacer wakes at most once per PACER_TICK and then releases every request due
    // by then: waking per request (tens of thousands of times a second) took CPU and
    // time slices from the server under test on a 2-core machine. A request released
    // late by up to a tick still counts its latency from its scheduled time, so the
    // tick can only make the reported latency worse, never better.
    let mut receivers: Vec<Option<mpsc::UnboundedReceiver<Instant>>> =
        (0..n).map(|_| None).collect();
    let pacer = args.rate.map(|rate| {
        let (senders, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::unbounded_channel()).unzip();
        for (slot, rx) in receivers.iter_mut().zip(rxs) {
            *slot = Some(rx);
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        std::thread::spawn(move || {
            let mut k: u32 = 0;
            loop {
                let now = Instant::now();
                let mut at = start + interval * k;
                while at <= now && at < end {
                    if let Some(tx) = senders.get(k as usize % senders.len()) {
                        let _ = tx.send(at);
                    }
                    k += 1;
                    at = start + interval * k;
                }
                if at >= end {
                    break;
                }
                std::thread::sleep((at - now).max(PACER_TICK));
            }
        })
    });
    let results = rt.block_on(async {
        let mut tasks = Vec::with_capacity(n);
        for (i, rx) in receivers.into_iter().enumerate() {
            tasks.push(tokio::spawn(drive(args.clone(), i as u64 + 1, end, rx)));
        }
        let mut out = Vec::with_capacity(n);
        for t in tasks {
            out.push(t.await);
        }
        (out, start.elapsed())
    });
    if let Some(p) = pacer
        && p.join().is_err()
    {
        bail!("pacer thread panicked");
    }
    let (results, elapsed) = results;
    let cpu_after = pid.as_deref().map(cpu_seconds).transpose()?;
    let self_after = cpu_seconds("self")?;

    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let (mut requests, mut errors, mut transport_errors) = (0u64, 0u64, 0u64);
    for r in results {
        let r = r.context("connection task failed")??;
        hist.add(&r.hist)?;
        requests += r.requests;
        errors += r.errors;
        transport_errors += r.transport_errors;
    }
    let secs = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let rps = requests as f64 / secs;
    let server_cpu = cpu_before.zip(cpu_after).map(|(b, a)| a - b);
    #[allow(clippy::cast_precision_loss)]
    let report = serde_json::json!({
        "label": args.label,
        "target": if args.ceiling { "ceiling" } else if args.body_template.is_some() { "template" } else { "oka" },
        "feature": args.feature,
        "mode": if args.rate.is_some() { "open" } else { "closed" },
        "offered_rps": args.rate,
        "connections": n,
        "batch": args.batch,
        "keys": args.keys,
        "requests": requests,
        "errors": errors,
        "transport_errors": transport_errors,
        "duration_s": (secs * 1000.0).round() / 1000.0,
        "rps": rps.round(),
        "feature_values_per_s": (rps * args.batch as f64).round(),
        "latency_ms": {
            "p50": ms(&hist, 0.50),
            "p90": ms(&hist, 0.90),
            "p99": ms(&hist, 0.99),
            "p99_9": ms(&hist, 0.999),
            "max": ms(&hist, 1.0),
        },
        "server_cpu_s": server_cpu,
        "server_cpu_s_per_request": server_cpu.map(|c| if requests > 0 { c / requests as f64 } else { 0.0 }),
        "server_cores_used": server_cpu.map(|c| c / secs),
        "client_cpu_s": self_after - self_before,
        "clk_tck_assumed": 100,
        "body_template": args.body_template,
    });
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
