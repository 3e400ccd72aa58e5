//! What a listener serves: the router, and the hot routes served before it.

use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::response::Response;

/// Routes served before the router is asked: the few hot ones, dispatched on
/// method and path alone, past the router's matching, method routing,
/// extractors and boxing (each request of them pays for those and gets nothing
/// from them).
pub trait Direct: Send + Sync + 'static {
    /// Serves `req` if it is one of these routes; otherwise hands it back for
    /// the router (by value: boxing it would cost an allocation per request).
    #[allow(clippy::result_large_err)]
    fn serve(
        &self,
        req: axum::http::Request<Body>,
    ) -> Result<DirectFuture, axum::http::Request<Body>>;
}

/// A request served by a [`Direct`] route.
pub type DirectFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What a connection serves: its [`Direct`] routes, if any, then the router.
#[derive(Clone)]
pub struct App {
    /// Every route.
    pub router: Router,
    /// The hot routes, served without the router.
    pub direct: Option<Arc<dyn Direct>>,
    /// A plain (not TLS) connection may speak HTTP/2 from its first byte
    /// ("prior knowledge", as gRPC clients do), told apart from HTTP/1.1 by
    /// HTTP/2's connection preface. On TLS, ALPN decides.
    pub h2c: bool,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("direct", &self.direct.is_some())
            .field("h2c", &self.h2c)
            .finish_non_exhaustive()
    }
}

impl From<Router> for App {
    fn from(router: Router) -> Self {
        Self {
            router,
            direct: None,
            h2c: false,
        }
    }
}
