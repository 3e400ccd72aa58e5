//! Helpers shared by the CLI tests: temporary files, free ports, a minimal HTTP
//! client, and `oka serve` started and stopped as a user would.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const OKA: &str = env!("CARGO_BIN_EXE_oka");

/// This test process's scratch directory, `oka-cli-test-PID` under the temporary
/// directory. A test binary cannot clean up when it ends, so the first call
/// removes those of processes that no longer run (otherwise every run leaves
/// tens of megabytes behind).
pub fn tmp_dir() -> std::path::PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let tmp = std::env::temp_dir();
    SWEPT.call_once(|| {
        for entry in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("oka-cli-test-")) else {
                continue;
            };
            if pid.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    let dir = tmp.join(format!("oka-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn tmp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let p = tmp_dir().join(name);
    std::fs::write(&p, contents).unwrap();
    p
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    Some((status, out.split_once("\r\n\r\n")?.1.to_owned()))
}

pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `oka serve`, ready, and its addresses.
pub struct Oka {
    pub server: Server,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
}

/// Starts `oka serve ARGS` on free loopback ports, its log (default filter) in `log` (or nowhere),
/// and waits until `/readyz` answers 200.
pub fn start_oka(args: &[&str], log: Option<&std::path::Path>) -> Oka {
    start_oka_env(args, &[], log)
}

/// [`start_oka`] with environment variables `env` set for the server.
pub fn start_oka_env(args: &[&str], env: &[(&str, &str)], log: Option<&std::path::Path>) -> Oka {
    let (port, admin_port) = (free_port(), free_port());
    let mut cmd = Command::new(OKA);
    cmd.envs(env.iter().copied());
    cmd.arg("serve")
        .args(args)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin_port}"),
        ])
        .stdout(Stdio::null());
    match log {
        // The log a user gets: the default filter.
        Some(path) => cmd
            .env_remove("OKA_LOG")
            .stderr(std::fs::File::create(path).unwrap()),
        None => cmd.stderr(Stdio::null()),
    };
    let mut server = Server(cmd.spawn().unwrap());
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{admin_port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while http(admin, "GET", "/readyz", "").map(|(s, _)| s) != Some(200) {
        assert!(Instant::now() < deadline, "server did not become ready");
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "server exited early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Oka {
        server,
        addr,
        admin,
    }
}

/// A service URL from `var`, or `None` (the test is skipped, and says so once;
/// a failure under `OKA_REQUIRE_*=1`): [`oka_storage::conformance::service`].
pub fn service_url(var: &str) -> Option<String> {
    oka_storage::conformance::service(var)
}

/// A redis-server of the test's own on `port` (loopback, no persistence), with
/// `extra` flags, stopped on drop; not waited for.
pub fn redis_server(port: u16, extra: &[&str]) -> Server {
    Server(
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits (up to 20 s) until process `pid` has caught signal number `signal`
/// (the kernel shows its handler in `SigCgt`). Before that, a signal sent to a
/// process still starting takes its default action, and on a busy machine the
/// start can take longer than any fixed wait.
#[allow(dead_code)] // not every test binary sends signals
pub fn wait_until_caught(pid: u32, signal: u32) {
    let caught = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))
                    .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            })
            .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !caught() {
        assert!(
            std::time::Instant::now() < until,
            "signal {signal} was never caught by {pid}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
