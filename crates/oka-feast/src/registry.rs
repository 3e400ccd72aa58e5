//! Feast's file registry (`registry.db`: one `feast.core.Registry` protobuf) as
//! the objects of one project that Oka serves: entities, feature views, on-demand
//! views, feature services and push sources, with every value type checked at
//! load (a type Feast's Redis store cannot hold, or Oka cannot map, is named).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use oka_core::value::FieldType;

mod on_demand;
pub use on_demand::OnDemandView;
use prost::Message;

use crate::config::RepoError;
use crate::proto::core as pc;
use crate::proto::types::value_type::Enum as VT;

/// The largest registry file read (Feast's registries are kilobytes to a few
/// megabytes; a bigger file is not one).
pub const MAX_REGISTRY_BYTES: u64 = 256 * 1024 * 1024;

/// The entity Feast gives a feature view declared without one.
const DUMMY_ENTITY: &str = "__dummy";

/// A Feast value type Oka serves: Feast's Redis store holds these (and null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeastType {
    /// `BYTES`
    Bytes,
    /// `STRING`
    String,
    /// `INT32`
    Int32,
    /// `INT64`
    Int64,
    /// `DOUBLE`
    Double,
    /// `FLOAT`
    Float,
    /// `BOOL`
    Bool,
    /// `UNIX_TIMESTAMP` (seconds)
    UnixTimestamp,
    /// A list of a scalar type (`BYTES_LIST` … `UNIX_TIMESTAMP_LIST`).
    List(Scalar),
}

/// The element type of a [`FeastType::List`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// bytes
    Bytes,
    /// string
    String,
    /// int32
    Int32,
    /// int64
    Int64,
    /// double
    Double,
    /// float
    Float,
    /// bool
    Bool,
    /// unix timestamp
    UnixTimestamp,
}

impl FeastType {
    /// The type of a registry's `ValueType.Enum` number, or its name when Oka
    /// does not serve it.
    pub fn from_proto(n: i32) -> Result<Self, UnsupportedType> {
        let Ok(e) = VT::try_from(n) else {
            return Err(UnsupportedType(format!("value type number {n}")));
        };
        Ok(match e {
            VT::Bytes => Self::Bytes,
            VT::String => Self::String,
            VT::Int32 => Self::Int32,
            VT::Int64 => Self::Int64,
            VT::Double => Self::Double,
            VT::Float => Self::Float,
            VT::Bool => Self::Bool,
            VT::UnixTimestamp => Self::UnixTimestamp,
            VT::BytesList => Self::List(Scalar::Bytes),
            VT::StringList => Self::List(Scalar::String),
            VT::Int32List => Self::List(Scalar::Int32),
            VT::Int64List => Self::List(Scalar::Int64),
            VT::DoubleList => Self::List(Scalar::Double),
            VT::FloatList => Self::List(Scalar::Float),
            VT::BoolList => Self::List(Scalar::Bool),
            VT::UnixTimestampList => Self::List(Scalar::UnixTimestamp),
            other => return Err(UnsupportedType(other.as_str_name().to_owned())),
        })
    }

    /// The type Oka serves it as (`bytes` are served as base64 strings, as
    /// Feast's JSON answers carry them).
    pub fn field_type(self) -> FieldType {
        match self {
            Self::Bytes | Self::String => FieldType::String,
            Self::Int32 | Self::Int64 => FieldType::Int,
            Self::Double | Self::Float => FieldType::Float,
            Self::Bool => FieldType::Bool,
            Self::UnixTimestamp => FieldType::Timestamp,
            Self::List(s) => FieldType::List(Box::new(Self::scalar(s).field_type())),
        }
    }

    /// The scalar type of list elements.
    pub fn scalar(s: Scalar) -> Self {
        match s {
            Scalar::Bytes => Self::Bytes,
            Scalar::String => Self::String,
            Scalar::Int32 => Self::Int32,
            Scalar::Int64 => Self::Int64,
            Scalar::Double => Self::Double,
            Scalar::Float => Self::Float,
            Scalar::Bool => Self::Bool,
            Scalar::UnixTimestamp => Self::UnixTimestamp,
        }
    }
}

/// A value type Oka does not serve, by Feast's name for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedType(pub String);

/// A typed name: a join key, a feature, a request field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The name.
    pub name: String,
    /// The type.
    pub ty: FeastType,
}

impl Column {
    /// A column named `name` of type `ty`.
    pub fn new(name: &str, ty: FeastType) -> Self {
        Self {
            name: name.to_owned(),
            ty,
        }
    }
}

/// A Feast entity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// The entity's name.
    pub name: String,
    /// Its join key and the key's type.
    pub join_key: Column,
}

/// A feature view (batch or stream): what `materialize` and pushes write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureView {
    /// The view's name (the `<view>` of its hash fields).
    pub name: String,
    /// Its join keys with their types, in the view's entity order.
    pub join_keys: Vec<Column>,
    /// Its features, in declaration order.
    pub features: Vec<Column>,
    /// Feast's `ttl`: a value older than this is `OUTSIDE_MAX_AGE` (none: never).
    pub ttl: Option<Duration>,
    /// Whether the view is served online.
    pub online: bool,
    /// The event-time column of the rows written to it (its batch source's
    /// `timestamp_field`; empty when it has none).
    pub timestamp_field: String,
    /// Its batch source's `field_mapping`: a written row's column to the
    /// feature it holds.
    pub field_mapping: BTreeMap<String, String>,
    /// An on-demand view with `write_to_online_store=True`: its message in the
    /// registry, byte for byte. What is written to it is its transformation's
    /// output (Feast runs it on the write, stamped with the write's time), read
    /// back as a feature view's rows.
    pub on_write: Option<std::sync::Arc<[u8]>>,
}

/// A column of `value_type`, or an error naming it (`what`: `join key`, …) when
/// Oka does not serve its type.
pub(crate) fn column(
    name: &str,
    value_type: i32,
    what: &str,
    at: &dyn Fn(String) -> RepoError,
) -> Result<Column, RepoError> {
    let ty = FeastType::from_proto(value_type).map_err(|t| {
        at(format!(
            "{what} `{name}` has type {t}, which Oka does not serve"
        ))
    })?;
    Ok(Column {
        name: name.to_owned(),
        ty,
    })
}

/// A feature service: projections of views, each possibly renamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureService {
    /// The service's name.
    pub name: String,
    /// Its projections, in order.
    pub projections: Vec<Projection>,
}

/// One view's features in a feature service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projection {
    /// The view projected.
    pub view: String,
    /// The name its features are answered under (`with_name`), if renamed.
    pub alias: Option<String>,
    /// The features taken (all of the view's when Feast stored none).
    pub features: Vec<String>,
}

/// A push source and the feature views it feeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushSource {
    /// The source's name (`push_source_name` in `/push`).
    pub name: String,
    /// The views whose stream source it is.
    pub views: Vec<String>,
}

/// One project's objects in a Feast registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeastRegistry {
    /// The project.
    pub project: String,
    /// Entities by name.
    pub entities: BTreeMap<String, Entity>,
    /// Feature views by name.
    pub views: BTreeMap<String, FeatureView>,
    /// On-demand views by name.
    pub on_demand: BTreeMap<String, OnDemandView>,
    /// Feature services by name.
    pub services: BTreeMap<String, FeatureService>,
    /// Push sources by name.
    pub push_sources: BTreeMap<String, PushSource>,
}

impl FeastRegistry {
    /// Reads the registry file at `path`, keeping the objects of `project`.
    pub fn load(path: &Path, project: &str) -> Result<Self, RepoError> {
        let shown = path.display();
        let size = std::fs::metadata(path)
            .map_err(|e| RepoError::caused(format!("{shown}: the registry cannot be read ({}); run `feast apply` in the feature repository first", crate::config::io_words(&e)), e))?
            .len();
        if size > MAX_REGISTRY_BYTES {
            return Err(RepoError::new(format!(
                "{shown}: {size} bytes, more than a registry holds (at most {MAX_REGISTRY_BYTES}); is this the registry file?"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| {
            let why = format!(
                "{shown}: the registry cannot be read ({})",
                crate::config::io_words(&e)
            );
            RepoError::caused(why, e)
        })?;
        Self::decode(&bytes, project).map_err(|e| RepoError::caused(format!("{shown}: {e}"), e))
    }

    /// Decodes a registry's bytes, keeping the objects of `project`.
    pub fn decode(bytes: &[u8], project: &str) -> Result<Self, RepoError> {
        let registry = pc::Registry::decode(bytes).map_err(|e| {
            let why = format!(
                "not a Feast registry (its protobuf does not decode: {e}); give the file registry `feast apply` writes"
            );
            RepoError::caused(why, e)
        })?;
        let mut out = Self {
            project: project.to_owned(),
            ..Self::default()
        };
        for e in &registry.entities {
            let Some(spec) = &e.spec else { continue };
            // Feast's placeholder entity of views without one (`__dummy`).
            if spec.project != project || spec.name == DUMMY_ENTITY {
                continue;
            }
            let ty = FeastType::from_proto(spec.value_type).map_err(|t| {
                RepoError::new(format!(
                    "entity `{}`: join key `{}` has type {t}, which Oka does not serve",
                    spec.name, spec.join_key
                ))
            })?;
            out.entities.insert(
                spec.name.clone(),
                Entity {
                    name: spec.name.clone(),
                    join_key: Column {
                        name: spec.join_key.clone(),
                        ty,
                    },
                },
            );
        }
        for v in &registry.feature_views {
            let Some(spec) = &v.spec else { continue };
            if spec.project != project {
                continue;
            }
            out.add_view(spec)?;
        }
        for s in &registry.stream_feature_views {
            let Some(spec) = &s.spec else { continue };
            if spec.project == project {
                out.add_stream_view(spec)?;
            }
        }
        // Each view's bytes as written (field 8 of `Registry`), beside its
        // decoded message.
        let raw = crate::wire::repeated_field(bytes, 8)
            .filter(|r| r.len() == registry.on_demand_feature_views.len())
            .unwrap_or_default();
        for (i, o) in registry.on_demand_feature_views.iter().enumerate() {
            let Some(spec) = &o.spec else { continue };
            if spec.project != project {
                continue;
            }
            out.add_on_demand(spec, raw.get(i).copied().unwrap_or_default())?;
        }
        for s in &registry.feature_services {
            let Some(spec) = &s.spec else { continue };
            if spec.project != project {
                continue;
            }
            out.add_service(spec);
        }
        for d in &registry.data_sources {
            if d.project == project && d.r#type == pc::data_source::SourceType::PushSource as i32 {
                out.push_sources
                    .entry(d.name.clone())
                    .or_insert(PushSource {
                        name: d.name.clone(),
                        views: Vec::new(),
                    });
            }
        }
        Ok(out)
    }

    /// A stream feature view's rows are written (by a push, or Feast's stream
    /// processor after its transformation and aggregations) into the same
    /// hashes as a batch view's: served as one. Its `features` list its join
    /// keys too (a batch view's do not): those are its entity columns.
    fn add_stream_view(&mut self, spec: &pc::StreamFeatureViewSpec) -> Result<(), RepoError> {
        let keys: Vec<&str> = (spec.entity_columns.iter().map(|c| c.name.as_str()))
            .chain(
                spec.entities
                    .iter()
                    .filter_map(|e| self.entities.get(e).map(|e| e.join_key.name.as_str())),
            )
            .collect();
        let features = spec
            .features
            .iter()
            .filter(|f| !keys.contains(&f.name.as_str()));
        let view = pc::FeatureViewSpec {
            name: spec.name.clone(),
            project: spec.project.clone(),
            entities: spec.entities.clone(),
            features: features.cloned().collect(),
            entity_columns: spec.entity_columns.clone(),
            ttl: spec.ttl,
            batch_source: spec.batch_source.clone(),
            stream_source: spec.stream_source.clone(),
            online: spec.online,
            ..pc::FeatureViewSpec::default()
        };
        self.add_view(&view)
    }

    /// A view's join keys: its entity columns, or (in older registries) its
    /// entities' join keys.
    pub(crate) fn join_keys(
        &self,
        entity_columns: &[pc::FeatureSpecV2],
        entities: &[String],
        at: &dyn Fn(String) -> RepoError,
    ) -> Result<Vec<Column>, RepoError> {
        let mut join_keys = Vec::new();
        for c in entity_columns {
            join_keys.push(column(&c.name, c.value_type, "join key", at)?);
        }
        if join_keys.is_empty() {
            for name in entities {
                if let Some(e) = self.entities.get(name) {
                    join_keys.push(e.join_key.clone());
                } else if name != DUMMY_ENTITY {
                    return Err(at(format!("its entity `{name}` is not in the registry")));
                }
            }
        }
        Ok(join_keys)
    }

    fn add_view(&mut self, spec: &pc::FeatureViewSpec) -> Result<(), RepoError> {
        let at = |what: String| RepoError::new(format!("feature view `{}`: {what}", spec.name));
        let join_keys = self.join_keys(&spec.entity_columns, &spec.entities, &at)?;
        let mut features = Vec::new();
        for f in &spec.features {
            let ty = FeastType::from_proto(f.value_type).map_err(|t| {
                at(format!(
                    "feature `{}` has type {t}, which Feast's Redis store does not hold as Oka reads it (served types: bytes, string, int32, int64, float, double, bool, unix_timestamp and their lists)",
                    f.name
                ))
            })?;
            features.push(Column {
                name: f.name.clone(),
                ty,
            });
        }
        let ttl = spec
            .ttl
            .as_ref()
            .map(|d| Duration::new(d.seconds.max(0) as u64, d.nanos.max(0) as u32))
            .filter(|d| !d.is_zero());
        if let Some(stream) = &spec.stream_source
            && stream.r#type == pc::data_source::SourceType::PushSource as i32
        {
            self.push_sources
                .entry(stream.name.clone())
                .or_insert_with(|| PushSource {
                    name: stream.name.clone(),
                    views: Vec::new(),
                })
                .views
                .push(spec.name.clone());
        }
        self.views.insert(
            spec.name.clone(),
            FeatureView {
                name: spec.name.clone(),
                join_keys,
                features,
                ttl,
                online: spec.online,
                timestamp_field: spec
                    .batch_source
                    .as_ref()
                    .map(|b| b.timestamp_field.clone())
                    .unwrap_or_default(),
                field_mapping: spec
                    .batch_source
                    .as_ref()
                    .map(|b| b.field_mapping.clone().into_iter().collect())
                    .unwrap_or_default(),
                on_write: None,
            },
        );
        Ok(())
    }

    fn add_service(&mut self, spec: &pc::FeatureServiceSpec) {
        let projections = spec
            .features
            .iter()
            .map(|p| Projection {
                view: p.feature_view_name.clone(),
                alias: Some(p.feature_view_name_alias.clone()).filter(|a| !a.is_empty()),
                features: p.feature_columns.iter().map(|f| f.name.clone()).collect(),
            })
            .collect();
        self.services.insert(
            spec.name.clone(),
            FeatureService {
                name: spec.name.clone(),
                projections,
            },
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_served_value_type_maps_to_an_oka_type() {
        for n in [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17, 18] {
            let t = FeastType::from_proto(n).unwrap();
            let ty = t.field_type();
            assert_eq!(FieldType::parse(&ty.to_string()), Some(ty), "{t:?}");
        }
        assert_eq!(FeastType::from_proto(20).unwrap_err().0, "MAP");
        assert_eq!(
            FeastType::from_proto(999).unwrap_err().0,
            "value type number 999"
        );
    }

    #[test]
    fn garbage_is_not_a_registry() {
        let e = FeastRegistry::decode(b"\xff\xff\xff", "p").unwrap_err();
        assert!(e.message().contains("not a Feast registry"), "{e}");
        // The decoder's own error is kept as the cause.
        let cause = std::error::Error::source(&e).expect("a cause");
        assert!(cause.is::<prost::DecodeError>(), "{cause:?}");
    }

    #[test]
    fn a_missing_registry_keeps_its_io_error() {
        let e =
            FeastRegistry::load(std::path::Path::new("/nonexistent/registry.db"), "p").unwrap_err();
        assert!(e.message().contains("run `feast apply`"), "{e}");
        let cause = std::error::Error::source(&e).expect("a cause");
        let io = cause
            .downcast_ref::<std::io::Error>()
            .expect("an io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    }
}
