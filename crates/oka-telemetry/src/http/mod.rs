//! The HTTP listener every Oka process serves on, with the same bounds
//! everywhere: a connection cap (beyond it a new connection is answered 503 and
//! closed), header-read and keep-alive idle timeouts, survival of running out of
//! file descriptors, and a drain on shutdown that answers every request whose
//! head has arrived.
//!
//! - [`Listener`]: one accept loop over one listening socket;
//! - [`conn`]: one connection, its timeouts, and how a shutdown reaches it;
//! - [`App`]: what a listener serves, the router and its [`Direct`] routes;
//! - [`ConnEvents`]: what the listener reports, which each process counts under
//!   the shared metric families ([`crate::families`]).

mod accept;
mod app;
pub mod conn;
mod drain;
mod listener;
mod refuse;
pub mod tls;

pub use accept::check_fd_limit;
pub use app::{App, Direct, DirectFuture};
pub use conn::{ConnTimeouts, Ended, Shutdown};
pub use drain::Drain;
pub use listener::{Listener, Served, bind};
pub use tls::{ClientIdentity, Tls, TlsError, TlsFiles};

use tokio::sync::watch;

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnTimeout {
    /// A request head did not arrive within the header-read timeout.
    HeaderRead,
    /// The connection sat idle between requests past the idle timeout.
    Idle,
}

impl ConnTimeout {
    /// Every value, in label order.
    pub const ALL: [ConnTimeout; 2] = [ConnTimeout::HeaderRead, ConnTimeout::Idle];

    /// The `phase` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::HeaderRead => "header_read",
            Self::Idle => "idle",
        }
    }
}

/// Why the listener refused a connection (answered 503 and closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnRefusal {
    /// Beyond the listener's connection cap.
    ConnectionCap,
    /// Taken while the process was out of file descriptors.
    FdLimit,
}

impl ConnRefusal {
    /// Every value, in label order.
    pub const ALL: [ConnRefusal; 2] = [ConnRefusal::ConnectionCap, ConnRefusal::FdLimit];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::ConnectionCap => "connection_cap",
            Self::FdLimit => "fd_limit",
        }
    }
}

/// Why a connection to a TLS port ended before a request could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// The client spoke plain HTTP (answered 400 in plain HTTP).
    PlainHttp,
    /// The handshake failed: no protocol or cipher in common, a client
    /// certificate missing or not trusted, a malformed message.
    Handshake,
}

impl TlsFailure {
    /// Every value, in label order.
    pub const ALL: [TlsFailure; 2] = [TlsFailure::PlainHttp, TlsFailure::Handshake];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::PlainHttp => "plain_http",
            Self::Handshake => "handshake",
        }
    }
}

/// What a [`Listener`] reports. Each process counts these under the
/// `oka_http_*` families of [`crate::families`], so the families mean the same
/// in every process.
pub trait ConnEvents: std::fmt::Debug + Send + Sync + 'static {
    /// A connection was accepted (including one then refused).
    fn connection_accepted(&self);
    /// A connection was refused.
    fn connection_refused(&self, why: ConnRefusal);
    /// `accept` failed; `fd_limit` when the process was out of descriptors.
    fn accept_failed(&self, fd_limit: bool);
    /// A timeout closed a connection.
    fn connection_timed_out(&self, phase: ConnTimeout);
    /// A shutdown closed `n` connections with complete requests unanswered.
    fn unanswered_connections(&self, n: u64);
    /// A connection to a TLS port ended before its handshake completed (a
    /// handshake too slow is a [`ConnTimeout::HeaderRead`]).
    fn tls_failed(&self, why: TlsFailure);
}

/// Resolves once `rx` reads true (or its sender is gone): the shutdown signal
/// every part of a server watches.
pub async fn stopped(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}
