//! Whether a spec fits a store: a store that answers only `latest` reads and takes
//! no writes ([`FeatureStore::capabilities`]) cannot serve features that read
//! history, nor run the spec's sources.

use oka_core::Registry;
use oka_core::registry::{FeatureKind, QueryKind};

use crate::FeatureStore;

/// What in a spec a store cannot serve: one line per problem, each naming the
/// feature, what it needs, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", problems.join("\n"))]
pub struct DoesNotFit {
    /// The problems, one per line.
    pub problems: Vec<String>,
}

/// Checks `registry` against `store`: with a store that answers only `latest`,
/// every dependency must read `latest` and no feature may have a source.
pub fn check_registry(store: &dyn FeatureStore, registry: &Registry) -> Result<(), DoesNotFit> {
    let Some(why) = store.capabilities().latest_only() else {
        return Ok(());
    };
    let mut problems = Vec::new();
    for f in registry.features() {
        match &f.kind {
            FeatureKind::OnDemand { dependencies, .. } => {
                for d in dependencies {
                    let dep = registry.feature(d.feature);
                    if dep.is_pipeline() && !matches!(d.query, QueryKind::Latest) {
                        problems.push(format!(
                            "features.{}: reads `{}` with `{}`, but {why}: read it with `latest`, or copy the data into Oka's layout (`oka migrate volga`) and serve from there",
                            f.name,
                            dep.name,
                            d.query.name()
                        ));
                    }
                }
            }
            FeatureKind::Pipeline {
                source: Some(_), ..
            } => problems.push(format!(
                "features.{}: has a `source`, but {why}, so nothing can be written to it: remove the source, or serve from a store in Oka's layout",
                f.name
            )),
            FeatureKind::Pipeline { .. } => {}
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(DoesNotFit { problems })
    }
}
