//! The shutdown signal every part of a server watches: a `watch` channel that
//! turns true once.

use tokio::sync::watch;

/// Resolves once `rx` reads true (or its sender is gone).
pub(crate) async fn stopped(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}
