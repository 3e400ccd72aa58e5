//! The shapes a worker keeps: what each feature list (or feature service)
//! made of a request, found again by the list's bytes (or, once a kept body
//! template holds the list, by its address), dropped when a registry is
//! replaced.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::Arc;

use oka_core::Registry;
use oka_feast::registry::FeastRegistry;

use super::Shape;
use crate::api::feast::{Features, Request};
use crate::error::ApiError;

thread_local! {
    /// The shapes kept per worker thread (no lock on the request path).
    pub(super) static PLANS: RefCell<Plans> = RefCell::new(Plans::default());
}

/// Shapes kept at most per worker; when full, all are dropped (a client sending
/// a new list with each request costs itself the planning, and no more memory).
pub(super) const SHAPES_KEPT: usize = 64;

/// A feature list longer than this (its names' bytes) is planned each time.
const KEPT_LIST_BYTES: usize = 16 * 1024;

/// The shapes of the registries last served: keyed by the feature list, the
/// feature service and `full_feature_names`; dropped at this worker's first
/// request after either registry is replaced (the registries are held here
/// until then, so no other can take their address).
#[derive(Default)]
pub(super) struct Plans {
    registries: Option<(Arc<FeastRegistry>, Arc<Registry>)>,
    hasher: foldhash::fast::RandomState,
    pub(super) kept: Vec<Kept>,
}

/// One kept shape, with what finds it.
pub(super) struct Kept {
    hash: u64,
    service: Option<String>,
    pub(super) features: List,
    full: bool,
    shape: Arc<Shape>,
}

/// A kept feature list: as the JSON body wrote it (the text a kept body
/// template holds, once a body through one has found it: then found by
/// address, not hashed), or as gRPC listed it.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum List {
    Json(Arc<str>),
    Names(Vec<String>),
}

impl List {
    /// Whether `features` is this list (in the same form).
    fn is(&self, features: &Features<'_>) -> bool {
        match (self, features) {
            (Self::Names(kept), Features::List(names)) => kept == names,
            (Self::Json(kept), features) => features.array() == Some(&**kept),
            (Self::Names(_), _) => false,
        }
    }
}

impl Plans {
    /// The request's shape: kept, or worked out (and kept).
    pub(super) fn shape(
        &mut self,
        feast: &Arc<FeastRegistry>,
        registry: &Arc<Registry>,
        request: &Request<'_>,
    ) -> Result<Arc<Shape>, ApiError> {
        let current = matches!(&self.registries,
            Some((f, r)) if Arc::ptr_eq(f, feast) && Arc::ptr_eq(r, registry));
        if !current {
            self.kept.clear();
            self.registries = Some((Arc::clone(feast), Arc::clone(registry)));
        }
        let service = request.feature_service.as_deref();
        let features = &request.features;
        let full = request.full_feature_names;
        let same = |k: &Kept| k.full == full && k.service.as_deref() == service;
        let kept_text = match features {
            Features::Kept(text) => Some(text),
            _ => None,
        };
        if let Some(text) = kept_text
            && let Some(k) = self.kept.iter().find(|k| {
                matches!(&k.features, List::Json(kept) if Arc::ptr_eq(kept, text)) && same(k)
            })
        {
            return Ok(Arc::clone(&k.shape));
        }
        let hash = match (features, features.array()) {
            (Features::List(names), _) => self.hasher.hash_one((service, names, full)),
            (_, raw) => self
                .hasher
                .hash_one((service, raw.unwrap_or_default(), full)),
        };
        let found =
            (self.kept.iter_mut()).find(|k| k.hash == hash && same(k) && k.features.is(features));
        if let Some(k) = found {
            if let Some(text) = kept_text {
                k.features = List::Json(Arc::clone(text));
            }
            return Ok(Arc::clone(&k.shape));
        }
        let shape = Arc::new(Shape::new(feast, registry, request)?);
        let (list, bytes) = match (features, features.array()) {
            (Features::List(names), _) => {
                let bytes = names.iter().map(String::len).sum();
                (List::Names(names.clone()), bytes)
            }
            (_, raw) => {
                let raw = raw.unwrap_or_default();
                let text = kept_text.map_or_else(|| Arc::from(raw), Arc::clone);
                (List::Json(text), raw.len())
            }
        };
        if bytes <= KEPT_LIST_BYTES {
            if self.kept.len() == SHAPES_KEPT {
                self.kept.clear();
            }
            self.kept.push(Kept {
                hash,
                service: service.map(str::to_owned),
                features: list,
                full,
                shape: Arc::clone(&shape),
            });
        }
        Ok(shape)
    }
}
