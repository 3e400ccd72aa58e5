//! Reads in Feast's layout (`layout=feast`): for each entity key, one `HMGET`
//! of the view's feature fields and its `_ts:<view>` field on the hash Feast's
//! SDK wrote (`oka_feast::layout`), pipelined: one round trip per request. A
//! hash without the view's event time holds no record of that view.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use fred::prelude::*;
use fred::types::Key;
use oka_core::entity::position_near;
use oka_core::{EntityKey, Feature, Query, Row, Value};
use oka_feast::FeastRegistry;
use oka_feast::layout;
use oka_feast::registry::FeatureView as FeastView;
use oka_storage::{StoreError, StoreErrorKind};

use super::{RedisStore, RedisValue, array_of, bytes_of};
use crate::volga_layout;

thread_local! {
    /// The fields each view's reads ask for, per worker thread, for the
    /// registry they were worked out from (held until a read with another:
    /// no other takes its address).
    static READ_FIELDS: RefCell<(Option<Arc<FeastRegistry>>, FieldsByView)> = RefCell::default();
}

/// A view's read fields, by the view's name.
type FieldsByView = HashMap<String, Arc<[Key]>>;

/// The fields a read of `view` asks for: its features' (`mmh3` of
/// `<view>:<feature>`), then its event time's. Worked out once per registry
/// and view (hashing them on every read cost a tenth of a request).
fn read_fields(registry: &Arc<FeastRegistry>, view: &FeastView) -> Arc<[Key]> {
    READ_FIELDS.with_borrow_mut(|(kept_for, views)| {
        if !kept_for.as_ref().is_some_and(|r| Arc::ptr_eq(r, registry)) {
            views.clear();
            *kept_for = Some(Arc::clone(registry));
        }
        if let Some(fields) = views.get(&view.name) {
            return Arc::clone(fields);
        }
        let features = view.features.iter();
        let fields: Arc<[Key]> = features
            .map(|f| Key::from(&layout::feature_field(&view.name, &f.name)[..]))
            .chain([Key::from(layout::ts_field(&view.name))])
            .collect();
        views.insert(view.name.clone(), Arc::clone(&fields));
        fields
    })
}

impl RedisStore {
    /// The registry of a `latest` read (the only one Feast's layout answers).
    fn feast_registry(
        &self,
        feature: &Feature,
        query: &Query,
    ) -> Result<std::sync::Arc<oka_feast::FeastRegistry>, StoreError> {
        if *query != Query::Latest {
            return Err(StoreError::new(
                StoreErrorKind::Unsupported,
                format!(
                    "redis: a `{}` read of `{}` in Feast's layout, which holds only the latest record",
                    query.name(),
                    feature.name
                ),
            ));
        }
        self.options
            .feast
            .as_ref()
            .map(|r| r.load_full())
            .ok_or_else(|| {
                StoreError::new(
                    StoreErrorKind::Misconfigured,
                    "redis: `layout=feast` without a Feast registry",
                )
            })
    }

    pub(super) async fn read_feast(
        &self,
        feature: &Feature,
        keys: &[EntityKey],
        query: &Query,
    ) -> Result<Vec<Vec<Row>>, StoreError> {
        let registry = self.feast_registry(feature, query)?;
        let view = feast_view(&registry, feature)?;
        let corrupt = |m: String| {
            StoreError::new(
                StoreErrorKind::Corrupt,
                format!("redis: Feast's `{}`: {m}", view.name),
            )
        };
        let fields = read_fields(&registry, view);
        let mut names = Vec::with_capacity(keys.len());
        let mut key_values = Vec::with_capacity(keys.len());
        for k in keys {
            let values = volga_layout::key_values(feature, k)
                .map_err(|e| corrupt(e.message().to_owned()))?;
            names.push(
                layout::redis_key(&registry.project, &view.join_keys, &values)
                    .map_err(|e| corrupt(e.message().to_owned()))?,
            );
            key_values.push(values);
        }
        let client = self.client();
        let pipeline = client.pipeline();
        for name in &names {
            let queued: Result<(), fred::error::Error> =
                pipeline.hmget(name.as_slice(), fields.to_vec()).await;
            queued.map_err(|e| self.conn.map(&e))?;
        }
        let replies: Vec<RedisValue> = pipeline
            .try_all::<RedisValue>()
            .await
            .into_iter()
            .map(|r| r.map_err(|e| self.conn.map(&e)))
            .collect::<Result<_, _>>()?;
        if replies.len() != keys.len() {
            return Err(corrupt(format!(
                "{} replies for {} keys",
                replies.len(),
                keys.len()
            )));
        }
        replies
            .into_iter()
            .zip(key_values)
            .map(|(reply, key_values)| {
                feast_row(feature, view, reply, key_values).map_err(|e| match e {
                    RowError::Store(e) => e,
                    RowError::Layout(m) => corrupt(m),
                })
            })
            .collect()
    }
}

impl RedisStore {
    /// Writes records as Feast's SDK does: per entity key, the view's event time
    /// and every feature's value into the key's hash, then Feast's
    /// `key_ttl_seconds` as its expiry; a record not newer than the one stored
    /// (or than a newer one in the same batch) is skipped, as Feast skips it.
    /// Like Feast's, the check and the write are two round trips, not atomic.
    pub(super) async fn write_feast(
        &self,
        feature: &Feature,
        records: &[(EntityKey, Row)],
    ) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let registry = self.feast_registry(feature, &Query::Latest)?;
        let view = feast_view(&registry, feature)?;
        let invalid = |m: String| {
            StoreError::new(
                StoreErrorKind::Misconfigured,
                format!("redis: writing Feast's `{}`: {m}", view.name),
            )
        };
        // The newest record of each key in the batch.
        let mut newest: std::collections::HashMap<Vec<u8>, &Row> = std::collections::HashMap::new();
        for (key, row) in records {
            let values = volga_layout::key_values(feature, key)
                .map_err(|e| invalid(e.message().to_owned()))?;
            let name = layout::redis_key(&registry.project, &view.join_keys, &values)
                .map_err(|e| invalid(e.message().to_owned()))?;
            match newest.get(&name) {
                Some(kept) if kept.event_time >= row.event_time => {}
                _ => {
                    newest.insert(name, row);
                }
            }
        }
        let view_fields = read_fields(&registry, view);
        let ts_field = layout::ts_field(&view.name);
        let client = self.client();
        let names: Vec<&Vec<u8>> = newest.keys().collect();
        let pipeline = client.pipeline();
        for name in &names {
            let queued: Result<(), fred::error::Error> =
                pipeline.hget(name.as_slice(), ts_field.as_str()).await;
            queued.map_err(|e| self.conn.map(&e))?;
        }
        let stored: Vec<RedisValue> = pipeline
            .try_all::<RedisValue>()
            .await
            .into_iter()
            .map(|r| r.map_err(|e| self.conn.map(&e)))
            .collect::<Result<_, _>>()?;
        let pipeline = client.pipeline();
        let mut writes = 0;
        for (name, before) in names.iter().zip(&stored) {
            let row = newest[*name];
            if let Some(bytes) = bytes_of(before)?
                && layout::decode_timestamp(bytes).is_ok_and(|t| t >= row.event_time)
            {
                continue;
            }
            let fields = hash_fields(feature, view, &view_fields, row)
                .map_err(|e| invalid(e.message().to_owned()))?;
            let queued: Result<(), fred::error::Error> =
                pipeline.hset(name.as_slice(), fields).await;
            queued.map_err(|e| self.conn.map(&e))?;
            if let Some(ttl) = self.options.feast_key_ttl {
                let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
                let queued: Result<(), fred::error::Error> =
                    pipeline.expire(name.as_slice(), ttl, None).await;
                queued.map_err(|e| self.conn.map(&e))?;
            }
            writes += 1;
        }
        if writes > 0 {
            for r in pipeline.try_all::<RedisValue>().await {
                r.map_err(|e| self.conn.map(&e))?;
            }
        }
        Ok(())
    }
}

/// A record as the fields Feast's SDK writes: the view's event time, then every
/// feature of the view (`names`: the view's fields, [`read_fields`]).
fn hash_fields(
    feature: &Feature,
    view: &FeastView,
    names: &[Key],
    row: &Row,
) -> Result<Vec<(Key, RedisValue)>, layout::LayoutError> {
    // `names` holds every feature's field, then the event time's.
    let ts = (names.len() == view.features.len() + 1)
        .then(|| names.last())
        .flatten();
    let ts = ts
        .cloned()
        .unwrap_or_else(|| Key::from(layout::ts_field(&view.name)));
    let mut fields: Vec<(Key, RedisValue)> = vec![(
        ts,
        RedisValue::Bytes(layout::encode_timestamp(row.event_time).into()),
    )];
    for (i, c) in feature.entity.columns.iter().enumerate() {
        let Some(at) = view.features.iter().position(|f| *f.name == *c.name) else {
            continue;
        };
        let f = &view.features[at];
        let value = row.columns.get(i).unwrap_or(&Value::Null);
        let bytes = layout::encode_value(value, f.ty)
            .map_err(|e| layout::LayoutError::caused(format!("feature `{}`: {e}", f.name), e))?;
        let name = (names.get(at).cloned())
            .unwrap_or_else(|| Key::from(&layout::feature_field(&view.name, &f.name)[..]));
        fields.push((name, RedisValue::Bytes(bytes.into())));
    }
    Ok(fields)
}

/// The view a feature reads, by name.
fn feast_view<'r>(
    registry: &'r oka_feast::FeastRegistry,
    feature: &Feature,
) -> Result<&'r oka_feast::registry::FeatureView, StoreError> {
    registry.views.get(&*feature.name).ok_or_else(|| {
        StoreError::new(
            StoreErrorKind::Misconfigured,
            format!(
                "redis: `{}` is not a feature view of Feast project `{}`",
                feature.name, registry.project
            ),
        )
    })
}

enum RowError {
    Store(StoreError),
    Layout(String),
}

impl From<StoreError> for RowError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// One `HMGET` reply as the view's record of the key (none when the hash holds
/// no event time of the view), its columns in the entity's order.
fn feast_row(
    feature: &Feature,
    view: &oka_feast::registry::FeatureView,
    reply: RedisValue,
    key_values: Vec<Value>,
) -> Result<Vec<Row>, RowError> {
    let got = array_of(reply)?;
    let Some(ts) = got.last().map(bytes_of).transpose()?.flatten() else {
        return Ok(Vec::new());
    };
    let event_time =
        layout::decode_timestamp(ts).map_err(|e| RowError::Layout(e.message().to_owned()))?;
    let entity = &feature.entity;
    let mut columns = Vec::with_capacity(entity.columns.len());
    let mut keys = key_values.into_iter();
    // The entity's value columns are the view's features, mostly in its order.
    let mut next = 0;
    for (i, c) in entity.columns.iter().enumerate() {
        if entity.key_index.contains(&i) {
            columns.push(keys.next().unwrap_or(Value::Null));
        } else if i == entity.timestamp_index {
            columns.push(Value::Timestamp(event_time));
        } else if let Some(j) = position_near(&view.features, next, |f| *f.name == *c.name) {
            next = j + 1;
            let value = match got.get(j).map(bytes_of).transpose()?.flatten() {
                None => Value::Null,
                Some(bytes) => layout::decode_value(bytes, view.features[j].ty)
                    .map_err(|e| RowError::Layout(format!("feature `{}`: {e}", c.name)))?,
            };
            columns.push(value);
        } else {
            columns.push(Value::Null);
        }
    }
    Ok(vec![Row::new(event_time, columns)])
}

/// The store's layout: the URL's `layout` option, or Feast's when the options
/// carry a Feast registry (`oka serve --feast-repo` gives it as a typed option,
/// not as a string in the URL). A `layout=feast` store needs the registry that
/// names its views.
pub(super) fn layout(
    from_url: crate::url::Layout,
    options: &super::RedisOptions,
) -> Result<crate::url::Layout, StoreError> {
    use crate::url::Layout;
    match (from_url, options.feast.is_some()) {
        (Layout::Feast, false) => Err(StoreError::new(
            StoreErrorKind::Misconfigured,
            "`layout=feast` reads Feast's online store with the feature views of its registry: serve it with `oka serve --feast-repo DIR`, which sets the layout itself",
        )),
        (Layout::Volga, true) => Err(StoreError::new(
            StoreErrorKind::Misconfigured,
            "`layout=volga` with a Feast repository: its online store is read in Feast's layout; leave `layout` out of the store URL",
        )),
        (_, true) => Ok(Layout::Feast),
        (layout, false) => Ok(layout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::Layout;

    #[test]
    fn the_layout_comes_with_the_registry_not_the_url() {
        let plain = super::super::RedisOptions::default();
        let feast = super::super::RedisOptions {
            feast: Some(oka_feast::shared(oka_feast::FeastRegistry::default())),
            ..Default::default()
        };
        assert_eq!(layout(Layout::Oka, &plain).ok(), Some(Layout::Oka));
        assert_eq!(layout(Layout::Volga, &plain).ok(), Some(Layout::Volga));
        assert_eq!(layout(Layout::Oka, &feast).ok(), Some(Layout::Feast));
        assert_eq!(layout(Layout::Feast, &feast).ok(), Some(Layout::Feast));
        let refused = |l| layout(l, &plain).err().or(layout(l, &feast).err());
        assert!(
            refused(Layout::Feast)
                .is_some_and(|e| e.message.contains("oka serve --feast-repo DIR"))
        );
        let volga = layout(Layout::Volga, &feast).err();
        assert!(volga.is_some_and(|e| e.message.contains("leave `layout` out")));
    }
}
