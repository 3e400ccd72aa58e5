//! Reading a Volga deployment's CQL data page by page, for `oka migrate volga`:
//! Volga's `hot_features (feature_name, keys_json, values_json)` table (keyspace
//! `persistent` by default), with the driver's paging state as a cursor that
//! survives restarts, so a copy can resume.

use std::time::Duration;

use oka_storage::{StoreError, StoreErrorKind};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::unprepared::Statement;

use crate::StoreUrl;
use crate::failure::{map_execution_error, map_session_error, unreachable};

/// Volga's keyspace when the URL names none.
pub const VOLGA_KEYSPACE: &str = "persistent";
/// Volga's table.
pub const VOLGA_TABLE: &str = "hot_features";

/// One row of Volga's table.
#[derive(Debug, Clone)]
pub struct VolgaRow {
    /// `feature_name`.
    pub feature: String,
    /// `keys_json`, Python's `json.dumps` of the key fields.
    pub keys_json: String,
    /// `values_json`, Python's `json.dumps` of the value fields.
    pub values_json: String,
}

/// A connection to the cluster that holds a Volga deployment's features.
pub struct VolgaCqlReader {
    session: Session,
    table: String,
}

impl std::fmt::Debug for VolgaCqlReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolgaCqlReader")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl VolgaCqlReader {
    /// Connects to `url` (`scylla://host[:port][,host…][/keyspace]` or
    /// `cassandra://…`; keyspace `persistent` when the URL names none).
    pub async fn connect(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let parsed = StoreUrl::parse(url)
            .map_err(|e| StoreError::new(StoreErrorKind::Internal, e.to_string()))?;
        let names_keyspace = url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .is_some_and(|(_, ks)| !ks.is_empty());
        let keyspace = if names_keyspace {
            parsed.keyspace.clone()
        } else {
            VOLGA_KEYSPACE.to_owned()
        };
        let mut builder = SessionBuilder::new()
            .known_nodes(&parsed.nodes)
            .connection_timeout(timeout);
        if let Some((user, password)) = &parsed.credentials {
            builder = builder.user(user, password);
        }
        let session = match builder.build().await {
            Ok(session) => session,
            Err(e) => return Err(unreachable(map_session_error(&e), &parsed.nodes).await),
        };
        Ok(Self {
            session,
            table: format!("{keyspace}.{VOLGA_TABLE}"),
        })
    }

    /// The page at `cursor` (`None`: the first) of about `count` rows, and the
    /// cursor of the next one (`None`: this was the last).
    pub async fn page(
        &self,
        cursor: Option<Vec<u8>>,
        count: u32,
    ) -> Result<(Vec<VolgaRow>, Option<Vec<u8>>), StoreError> {
        let mut statement = Statement::new(format!(
            "SELECT feature_name, keys_json, values_json FROM {}",
            self.table
        ));
        statement.set_page_size(i32::try_from(count).unwrap_or(i32::MAX));
        let state = cursor.map_or_else(PagingState::start, PagingState::new_from_raw_bytes);
        let (result, next) = self
            .session
            .query_single_page(statement, (), state)
            .await
            .map_err(|e| map_execution_error(&e))?;
        let corrupt = |e: &dyn std::fmt::Display| {
            StoreError::new(StoreErrorKind::Corrupt, format!("cql: {}: {e}", self.table))
        };
        let rows = result.into_rows_result().map_err(|e| corrupt(&e))?;
        let rows = rows
            .rows::<(Option<String>, Option<String>, Option<String>)>()
            .map_err(|e| corrupt(&e))?
            .map(|r| {
                r.map(|(feature, keys_json, values_json)| VolgaRow {
                    feature: feature.unwrap_or_default(),
                    keys_json: keys_json.unwrap_or_default(),
                    values_json: values_json.unwrap_or_default(),
                })
                .map_err(|e| corrupt(&e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let next = match next {
            PagingStateResponse::HasMorePages { state } => {
                state.as_bytes_slice().map(|b| b.to_vec())
            }
            PagingStateResponse::NoMorePages => None,
        };
        Ok((rows, next))
    }
}
