//! Failed accepts and descriptor limits: which accept errors are the client's,
//! running out of descriptors (a spare one freed to answer 503), rate-limited
//! logging, and the start-up check of the descriptor limit.

use std::io;
use std::time::{Duration, Instant};

use tracing::warn;

use super::{ConnEvents, ConnRefusal};
use crate::words::io_reason;

/// Failed accepts are logged at most this often per server.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);

/// Accept errors that concern one connection (it went away before it was taken).
pub(crate) fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// `EMFILE` (the process) or `ENFILE` (the system) is out of file descriptors.
fn is_fd_limit(e: &io::Error) -> bool {
    // Linux's and the BSDs' numbers: ENFILE 23, EMFILE 24.
    matches!(e.raw_os_error(), Some(23 | 24))
}

/// A spare descriptor, closed to make room for one `accept` when the process
/// is out of descriptors, so that connection gets a 503 instead of waiting in
/// the backlog.
fn spare_fd() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// What a server remembers about failed accepts: the spare descriptor and when
/// it last logged one.
pub(super) struct AcceptErrors {
    spare: Option<std::fs::File>,
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl AcceptErrors {
    pub(super) fn new() -> Self {
        Self {
            spare: spare_fd(),
            last_logged: None,
            unlogged: 0,
        }
    }

    /// Counts and (at most every [`ACCEPT_LOG_EVERY`]) logs a failed accept. Out of
    /// descriptors, it closes the spare one to take one waiting connection and
    /// answer it 503 (on a TLS listener, `tls`, it is closed unanswered: a
    /// plain-text answer would be garbage to the client's handshake, and a TLS
    /// one needs the handshake the refusal is there to avoid); when nothing
    /// could be freed it sleeps a little, so that an
    /// error that persists is not a busy loop.
    pub(super) async fn handle(
        &mut self,
        name: &str,
        events: &dyn ConnEvents,
        listener: &tokio::net::TcpListener,
        (e, tls): (&io::Error, bool),
    ) {
        let fd_limit = is_fd_limit(e);
        events.accept_failed(fd_limit);
        if self
            .last_logged
            .is_none_or(|t| t.elapsed() >= ACCEPT_LOG_EVERY)
        {
            let reason = if fd_limit {
                "the process is out of file descriptors; new connections are refused until some close (raise the limit, `ulimit -n`, or lower --max-connections)"
            } else {
                "accepting a connection failed"
            };
            warn!(server = %name, error = %io_reason(e), suppressed = self.unlogged, "{reason}");
            self.last_logged = Some(Instant::now());
            self.unlogged = 0;
        } else {
            self.unlogged += 1;
        }
        if fd_limit && self.spare.take().is_some() {
            if let Some(Ok((stream, _))) = futures::FutureExt::now_or_never(listener.accept()) {
                events.connection_accepted();
                events.connection_refused(ConnRefusal::FdLimit);
                if !tls {
                    super::refuse::refuse_now(&stream);
                }
            }
            self.spare = spare_fd();
        }
        if self.spare.is_none() || !fd_limit {
            // Nothing freed: do not spin on an error that persists.
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.spare = self.spare.take().or_else(spare_fd);
        }
    }
}

/// Warns when the process's descriptor limit is below what the connection caps
/// allow (Linux: read from `/proc/self/limits`).
pub fn check_fd_limit(connections: usize) {
    let Some(limit) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| soft_fd_limit(&text))
    else {
        return;
    };
    // The store clients, listeners, the runtime and logs need some too.
    let needed = connections.saturating_add(64);
    if (limit as usize) < needed {
        warn!(
            fd_limit = limit,
            connection_caps = connections,
            "the file-descriptor limit is below what the connection caps allow; at the limit new connections are refused with 503 (raise `ulimit -n` or lower --max-connections)"
        );
    }
}

/// The soft `Max open files` of a `/proc/<pid>/limits` text.
fn soft_fd_limit(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_soft_descriptor_limit() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1024                 524288               files     \n";
        assert_eq!(soft_fd_limit(text), Some(1024));
        assert_eq!(
            soft_fd_limit("Max open files  unlimited unlimited files"),
            None
        );
        assert_eq!(soft_fd_limit(""), None);
    }
}
