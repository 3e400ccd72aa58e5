//! Hostile clients over real sockets: slow bodies, trickling heads, idle
//! keep-alive connections, the connection cap, and shutdown with connections in
//! every state.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use oka_server::Limits;
use oka_server::runtime::ConnTimeouts;
use oka_server::runtime::{Running, ServerConfig, start};

use super::{Fixture, fixture_with};

const SEED: &str = r#"{"target_features": ["simple_feature"], "keys": [{"id": "test-id-21"}], "udf_args": {"simple_feature": {"multiplier": 2.0}}}"#;

fn request(body: &str) -> Vec<u8> {
    format!(
        "POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A response read off a keep-alive connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Reads one response (head and `content-length` body); `None` when the server
/// closed the connection first.
fn read_answer(s: &mut TcpStream) -> Option<Answer> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8(buf).ok()?;
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).ok()?;
    Some(Answer {
        status: head.get(9..12)?.parse().ok()?,
        head,
        body: String::from_utf8(body).ok()?,
    })
}

/// Whether the server has closed `s` (EOF or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One worker over the test fixture.
async fn server(limits: Limits, configure: impl FnOnce(&mut ServerConfig)) -> (Fixture, Running) {
    let f = fixture_with(limits).await;
    let mut config = ServerConfig {
        workers: 1,
        pin: false,
        ..ServerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        )
    };
    configure(&mut config);
    let running = start(&config, f.shared.clone()).unwrap();
    (f, running)
}

/// Shuts `running` down off the async test's thread.
async fn stop(running: Running) -> oka_server::runtime::Shutdown {
    tokio::task::spawn_blocking(move || running.shutdown(Duration::from_secs(5)))
        .await
        .unwrap()
}

async fn metrics(f: &Fixture) -> String {
    let (_, resp) = super::send(&f.admin, super::get("/metrics")).await;
    super::body_text(resp).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_beyond_the_in_flight_limit_do_not_starve_fast_requests() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(
        Limits {
            max_in_flight: 2,
            ..Limits::default()
        },
        |_| {},
    )
    .await;
    let addr = running.addr;
    let answers = tokio::task::spawn_blocking(move || {
        // Eight uploads that sent their head and one byte of a 100-byte body.
        let slow: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(
                    b"POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\n{",
                )
                .unwrap();
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let answers: Vec<Answer> = (0..5)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(&request(SEED)).unwrap();
                read_answer(&mut s).unwrap()
            })
            .collect();
        drop(slow);
        answers
    })
    .await
    .unwrap();
    for a in &answers {
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.body.contains("\"value\":42.0"), "{a:?}");
    }
    assert!(
        metrics(&f)
            .await
            .contains("oka_http_requests_shed_total{worker=\"0\"} 0"),
        "nothing shed"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_in_time_gets_408_and_a_closed_connection() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(
        Limits {
            body_read_timeout: Duration::from_millis(300),
            ..Limits::default()
        },
        |_| {},
    )
    .await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        let mut s = connect(addr);
        s.write_all(b"POST /v1/features HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\n{\"ta")
            .unwrap();
        let started = Instant::now();
        let a = read_answer(&mut s).expect("an answer, not a bare close");
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(a.status, 408, "{a:?}");
        assert!(a.body.contains("\"body_timeout\""), "{a:?}");
        assert!(a.head.contains("connection: close"), "{a:?}");
        assert!(closed_within(&mut s, Duration::from_secs(5)));

        // A declared length over the limit is refused before any body is sent.
        let mut s = connect(addr);
        s.write_all(b"POST /v1/ingest HTTP/1.1\r\nhost: t\r\ncontent-length: 999999999\r\n\r\n")
            .unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 413, "{a:?}");
        assert!(a.body.contains("\"payload_too_large\""), "{a:?}");
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        m.contains("oka_http_refused_total{reason=\"body_timeout\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("oka_http_refused_total{reason=\"body_too_large\"} 1"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_head_is_closed_after_the_header_timeout() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let header_read = Duration::from_millis(400);
    let (f, running) = server(Limits::default(), |c| {
        c.timeouts = ConnTimeouts {
            header_read,
            idle: Duration::from_secs(60),
        }
    })
    .await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        // A head trickled a byte every 50 ms, and a connection that sends nothing.
        let mut silent = connect(addr);
        let mut s = connect(addr);
        let started = Instant::now();
        let head = b"POST /v1/features HTTP/1.1\r\nhost: t\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut closed = false;
        for b in head.iter() {
            if s.write_all(&[*b]).is_err() {
                closed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            if started.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        assert!(closed || closed_within(&mut s, Duration::from_secs(5)), "still open");
        assert!(started.elapsed() >= header_read, "{:?}", started.elapsed());
        assert!(closed_within(&mut silent, Duration::from_secs(5)), "silent connection still open");
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        m.contains("oka_http_connection_timeouts_total{phase=\"header_read\"} 2"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_head_after_an_answer_is_closed_after_the_header_timeout_not_the_idle_one() {
    // The idle deadline armed after an answer is far off; the next head's shorter
    // deadline must replace it (the timer is re-armed lazily, only when it must
    // fire sooner).
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let header_read = Duration::from_millis(400);
    let (f, running) = server(Limits::default(), |c| {
        c.timeouts = ConnTimeouts {
            header_read,
            idle: Duration::from_secs(60),
        }
    })
    .await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        let mut s = connect(addr);
        s.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut s).unwrap().status, 200);
        // Idle past the first head's deadline: the timer has moved to the idle one.
        std::thread::sleep(header_read * 2);
        let started = Instant::now();
        s.write_all(b"POST /v1/features HTTP/1.1\r\nhost: t\r\n")
            .unwrap();
        assert!(closed_within(&mut s, Duration::from_secs(5)), "still open");
        assert!(started.elapsed() >= header_read, "{:?}", started.elapsed());
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        m.contains("oka_http_connection_timeouts_total{phase=\"header_read\"} 1"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout_not_the_header_timeout() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(Limits::default(), |c| {
        c.timeouts = ConnTimeouts {
            header_read: Duration::from_millis(200),
            idle: Duration::from_millis(1200),
        }
    })
    .await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        let mut s = connect(addr);
        s.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut s).unwrap().status, 200);
        // Idle for longer than the header timeout: still open.
        std::thread::sleep(Duration::from_millis(500));
        s.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut s).unwrap().status, 200, "kept alive");
        let idle_from = Instant::now();
        assert!(
            closed_within(&mut s, Duration::from_secs(10)),
            "closed when idle"
        );
        assert!(
            idle_from.elapsed() >= Duration::from_millis(1100),
            "{:?}",
            idle_from.elapsed()
        );
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        m.contains("oka_http_connection_timeouts_total{phase=\"idle\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("oka_http_connection_timeouts_total{phase=\"header_read\"} 0"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_connection_cap_a_new_connection_is_answered_503_at_once() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(Limits::default(), |c| c.max_connections = 4).await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        let mut held: Vec<TcpStream> = (0..4)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(&request(SEED)).unwrap();
                assert_eq!(read_answer(&mut s).unwrap().status, 200);
                s
            })
            .collect();
        let mut extra = connect(addr);
        extra
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let _ = extra.write_all(&request(SEED));
        let a = read_answer(&mut extra).expect("a 503, not a hang");
        assert_eq!(a.status, 503, "{a:?}");
        assert!(a.head.contains("retry-after: 1"), "{a:?}");
        assert!(a.body.contains("\"overloaded\""), "{a:?}");
        assert!(closed_within(&mut extra, Duration::from_secs(3)));
        // Once one closes, a new connection is served.
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut s = connect(addr);
            s.write_all(&request(SEED)).unwrap();
            let a = read_answer(&mut s).unwrap();
            if a.status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "not served again: {a:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        !m.contains("oka_http_refused_total{reason=\"connection_cap\"} 0"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_connections_and_half_heads_and_serves_requests_begun() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (_f, running) = server(Limits::default(), |_| {}).await;
    let addr = running.addr;
    let (report, took) = tokio::task::spawn_blocking(move || {
        let mut idle_fresh = connect(addr);
        let mut idle_kept = connect(addr);
        idle_kept.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut idle_kept).unwrap().status, 200);
        let whole = request(SEED);
        let split = whole.len() - SEED.len();
        // Half a head on a new connection, half a head behind an answered
        // request, and a head whose body is still arriving.
        let mut half_head = connect(addr);
        half_head.write_all(&whole[..10]).unwrap();
        let mut kept_half_head = connect(addr);
        kept_half_head.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut kept_half_head).unwrap().status, 200);
        kept_half_head.write_all(&whole[..20]).unwrap();
        let mut half_body = connect(addr);
        half_body.write_all(&whole[..split + 5]).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let stopper = std::thread::spawn(move || running.shutdown(Duration::from_secs(20)));
        // Idle connections, and those holding part of a head, close at once
        // and unanswered: a half-sent head does not hold the shutdown for the
        // header-read timeout.
        for s in [
            &mut idle_fresh,
            &mut idle_kept,
            &mut half_head,
            &mut kept_half_head,
        ] {
            assert!(closed_within(s, Duration::from_secs(1)));
        }
        // A request whose head has arrived is read to its end, served, and
        // answered with `connection: close`.
        std::thread::sleep(Duration::from_millis(300));
        half_body.write_all(&whole[split + 5..]).unwrap();
        let a =
            read_answer(&mut half_body).expect("a request begun before the shutdown is answered");
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.head.contains("connection: close"), "{a:?}");
        assert!(closed_within(&mut half_body, Duration::from_secs(1)));
        let report = stopper.join().unwrap();
        (report, started.elapsed())
    })
    .await
    .unwrap();
    assert!(report.clean(), "{report}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_serves_on_with_connection_close_and_fails_readiness() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (_f, running) = server(Limits::default(), |_| {}).await;
    let (addr, admin) = (running.addr, running.admin_addr);
    running.drain();
    let running = tokio::task::spawn_blocking(move || {
        // A kept-alive connection is answered, and told to go.
        let mut s = connect(addr);
        s.write_all(&request(SEED)).unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.head.contains("connection: close"), "{a:?}");
        assert!(closed_within(&mut s, Duration::from_secs(1)));
        // New connections are still accepted and served.
        let mut s = connect(addr);
        s.write_all(&request(SEED)).unwrap();
        assert_eq!(read_answer(&mut s).unwrap().status, 200);
        // Readiness fails; the admin port keeps its connections.
        let mut s = connect(admin);
        s.write_all(b"GET /readyz HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 503, "{a:?}");
        assert!(a.body.contains("shutting down"), "{a:?}");
        assert!(!a.head.contains("connection: close"), "{a:?}");
        running
    })
    .await
    .unwrap();
    assert!(stop(running).await.clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_under_load_answers_every_request_sent() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (_f, running) = server(Limits::default(), |_| {}).await;
    let addr = running.addr;
    // Large requests keep the workers busy, so that requests wait whole in the
    // sockets' buffers, unread, when the shutdown comes.
    let keys: Vec<String> = (0..5000)
        .map(|i| format!(r#"{{"id": "test-id-{i}"}}"#))
        .collect();
    let big = format!(
        r#"{{"target_features": ["simple_feature"], "keys": [{}]}}"#,
        keys.join(",")
    );
    let (report, answered, lost) = tokio::task::spawn_blocking(move || {
        let stopping = Arc::new(std::sync::RwLock::new(false));
        let clients: Vec<_> = (0..32)
            .map(|_| {
                let stopping = Arc::clone(&stopping);
                let big = big.clone();
                std::thread::spawn(move || {
                    let mut s = connect(addr);
                    let (mut answered, mut lost) = (0u32, 0u32);
                    // Keep-alive requests until one comes back `connection: close`
                    // or the connection is closed without an answer.
                    loop {
                        // Written whole under the read lock: `before_shutdown` is
                        // true only for requests sent before the shutdown began.
                        let before_shutdown = {
                            let stopping = stopping.read().unwrap();
                            if s.write_all(&request(&big)).is_err() {
                                break;
                            }
                            !*stopping
                        };
                        match read_answer(&mut s) {
                            Some(a) => {
                                assert_eq!(a.status, 200, "{a:?}");
                                answered += 1;
                                if a.head.contains("connection: close") {
                                    break;
                                }
                            }
                            None => {
                                // A request written once the shutdown began may
                                // meet a connection closing as idle (the race of
                                // every keep-alive client); one written before
                                // must be answered.
                                lost += u32::from(before_shutdown);
                                break;
                            }
                        }
                    }
                    (answered, lost)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        *stopping.write().unwrap() = true;
        let report = running.shutdown(Duration::from_secs(20));
        let (mut answered, mut lost) = (0, 0);
        for c in clients {
            let (a, l) = c.join().unwrap();
            answered += a;
            lost += l;
        }
        (report, answered, lost)
    })
    .await
    .unwrap();
    assert!(answered > 32, "answered {answered}");
    assert_eq!(
        lost, 0,
        "requests sent before the shutdown went unanswered ({answered} answered): {report}"
    );
    assert!(report.clean(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_pipelined_requests_answers_the_one_served_and_reports_the_rest() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(Limits::default(), |_| {}).await;
    f.store.delay_ms.store(400, Ordering::SeqCst);
    let addr = running.addr;
    let running = Arc::new(std::sync::Mutex::new(Some(running)));
    let (report, answers) = tokio::task::spawn_blocking(move || {
        let mut s = connect(addr);
        // Two requests in one write: the second sits unread behind the first.
        let mut both = request(SEED);
        both.extend_from_slice(&request(SEED));
        s.write_all(&both).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        let r = running.lock().unwrap().take().unwrap();
        let stopper = std::thread::spawn(move || r.shutdown(Duration::from_secs(10)));
        let mut answers = Vec::new();
        while let Some(a) = read_answer(&mut s) {
            answers.push(a);
        }
        (stopper.join().unwrap(), answers)
    })
    .await
    .unwrap();
    // Each request either got an answer, or the shutdown says it was not clean.
    assert!(!answers.is_empty(), "the request being served is answered");
    assert_eq!(answers[0].status, 200, "{answers:?}");
    assert!(answers[0].head.contains("connection: close"), "{answers:?}");
    if answers.len() < 2 {
        assert_eq!(report.unanswered, 1, "{report}");
        assert!(!report.clean());
        assert!(report.to_string().contains("unanswered"), "{report}");
    } else {
        assert!(report.clean(), "{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingest_bodies_beyond_the_ingest_budget_get_503_with_retry_after() {
    let _one_at_a_time = super::WORKER_THREADS.lock().await;
    let (f, running) = server(
        Limits {
            max_ingest_bytes: 1000,
            ..Limits::default()
        },
        |_| {},
    )
    .await;
    let addr = running.addr;
    tokio::task::spawn_blocking(move || {
        let ingest_head = |len: usize| {
            format!("POST /v1/ingest HTTP/1.1\r\nhost: t\r\ncontent-length: {len}\r\n\r\n")
        };
        // A 700-byte upload in progress holds 700 bytes of the budget…
        let mut slow = connect(addr);
        slow.write_all(ingest_head(700).as_bytes()).unwrap();
        slow.write_all(b"{\"feature\": \"test_feature\", ").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        // …so another 700 bytes do not fit, and are refused before being read.
        let mut s = connect(addr);
        s.write_all(ingest_head(700).as_bytes()).unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 503, "{a:?}");
        assert!(a.head.contains("retry-after: 1"), "{a:?}");
        assert!(a.body.contains("ingest budget"), "{a:?}");
        // A body that fits is served; the budget is whole again once bodies finish.
        let small = r#"{"feature": "test_feature", "records": [{"id": "b1", "value": 1.0}]}"#;
        let mut s = connect(addr);
        s.write_all(ingest_head(small.len()).as_bytes()).unwrap();
        s.write_all(small.as_bytes()).unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 200, "{a:?}");
        assert!(a.body.contains("\"written\":1"), "{a:?}");
        drop(slow);
        std::thread::sleep(Duration::from_millis(100));
        let mut s = connect(addr);
        let big = format!(
            r#"{{"feature": "test_feature", "records": [{}]}}"#,
            vec![r#"{"id": "b2", "value": 2.0}"#; 25].join(",")
        );
        assert!(big.len() > 700 && big.len() < 1000);
        s.write_all(ingest_head(big.len()).as_bytes()).unwrap();
        s.write_all(big.as_bytes()).unwrap();
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 200, "{a:?}");
        // Without a declared length the budget is taken as the chunks arrive.
        let mut s = connect(addr);
        s.write_all(b"POST /v1/ingest HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n")
            .unwrap();
        for _ in 0..3 {
            let chunk = " ".repeat(500);
            let _ = write!(s, "{:x}\r\n{chunk}\r\n", chunk.len());
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = s.write_all(b"0\r\n\r\n");
        let a = read_answer(&mut s).unwrap();
        assert_eq!(a.status, 503, "{a:?}");
        assert!(a.body.contains("ingest budget"), "{a:?}");
    })
    .await
    .unwrap();
    let m = metrics(&f).await;
    assert!(
        m.contains("oka_http_refused_total{reason=\"ingest_budget\"} 2"),
        "{m}"
    );
    assert!(stop(running).await.clean());
}
