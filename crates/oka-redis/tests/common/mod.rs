//! Finding (or starting) a Redis server for tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oka_redis::{RedisOptions, RedisStore};

/// The shared test server's URL (`OKA_TEST_REDIS_URL`, started by `.ci/run`).
/// Without it the Redis tests are skipped, unless `OKA_REQUIRE_REDIS=1` (set by
/// `.ci/run`), which makes a missing server a failure.
pub fn redis_url() -> Option<String> {
    oka_storage::conformance::service("OKA_TEST_REDIS_URL")
}

pub async fn connect(url: &str) -> RedisStore {
    RedisStore::connect(url, RedisOptions::default())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// A redis-server of the test's own on a free loopback port (no persistence),
/// stopped on drop.
pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
}

impl OwnRedis {
    pub fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = Self { port, child: None };
        r.restart();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server not found: install it (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
