//! Volga's request and answer as the OpenAPI document describes them.

use indexmap::IndexMap;
use oka_core::FeatureRequest;
use oka_core::encode::openapi::{KeyError, KeyStatus, Record};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, SchemaType, Type};

/// `FeatureRequest` as Volga's routes read it, where an unknown top-level field is
/// ignored rather than refused: its schema, made from `FeatureRequest`'s.
#[derive(Debug)]
pub(crate) struct VolgaFeatureRequest;

impl utoipa::PartialSchema for VolgaFeatureRequest {
    fn schema() -> RefOr<Schema> {
        let mut schema = <FeatureRequest as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(lenient)) = &mut schema {
            lenient.additional_properties = None;
            lenient.description = Some(
                "A feature request as Volga's routes read it: the fields of `FeatureRequest`, with Volga's leniency where Volga's server answered 200: a top-level field Oka does not know is ignored, `target_features` may be empty (the answer's `results` is then empty, and the other fields are not read), and a key object whose fields do not fit the entity (a missing key field, an unknown one, a value of the wrong type) is answered `null` with status `invalid_key` (so a key object's values may be any JSON value; a key that is not an object is still a 400).".to_owned(),
            );
            if let Some(RefOr::T(Schema::Array(targets))) =
                lenient.properties.get_mut("target_features")
            {
                targets.min_items = None;
            }
            let any_keys = || {
                let loose_key = ObjectBuilder::new().additional_properties(Some(
                    ObjectBuilder::new().schema_type(SchemaType::AnyValue),
                ));
                ArrayBuilder::new().items(loose_key).description(Some(
                    "Key objects; one whose fields do not fit the entity is answered `null` with status `invalid_key`.",
                ))
            };
            lenient.properties.insert(
                "keys".to_owned(),
                any_keys()
                    .schema_type(SchemaType::Array(vec![Type::Array, Type::Null]))
                    .into(),
            );
            // With no targets nothing else is read (Volga answered 200 then);
            // with targets, each feature's query arguments are checked against
            // the query it reads (`400 invalid_query_arg`).
            let any_args = ObjectBuilder::new()
                .schema_type(SchemaType::Array(vec![Type::Object, Type::Null]))
                .additional_properties(Some(
                    ObjectBuilder::new().schema_type(SchemaType::AnyValue),
                ));
            lenient.properties.insert(
                "query_args".to_owned(),
                ObjectBuilder::new()
                    .schema_type(SchemaType::Array(vec![Type::Object, Type::Null]))
                    .additional_properties(Some(any_args))
                    .description(Some(
                        "Query parameters by feature name, as in `FeatureRequest`: `start`/`end` (RFC 3339 or epoch seconds) or `n`. Checked only for the features the targets read, so any values pass with an empty `target_features`.",
                    ))
                    .into(),
            );
            lenient.properties.insert(
                "feature_keys".to_owned(),
                ObjectBuilder::new()
                    .schema_type(SchemaType::Array(vec![Type::Object, Type::Null]))
                    .additional_properties(Some(any_keys()))
                    .description(Some(
                        "Key lists by feature name (Volga's form); items as in `keys`.",
                    ))
                    .into(),
            );
        }
        schema
    }
}

impl utoipa::ToSchema for VolgaFeatureRequest {}

/// The answer on Volga's routes (`/on_demand_compute`): Volga's shape.
#[derive(Debug, utoipa::ToSchema)]
#[allow(dead_code)] // a schema: never built
pub(crate) struct VolgaFeatureResponse {
    /// As on `/v1/features`, with naive UTC timestamps. `{}` when
    /// `target_features` is empty.
    pub results: IndexMap<String, Vec<Option<Vec<Record>>>>,
    /// As on `/v1/features`; absent when `target_features` is empty.
    #[schema(required = false)]
    pub statuses: IndexMap<String, Vec<KeyStatus>>,
    /// As on `/v1/features`.
    #[schema(required = false)]
    pub errors: IndexMap<String, Vec<Option<KeyError>>>,
    /// The worker that answered: its 1-based number, an integer (Volga's client
    /// parses an int).
    #[schema(minimum = 1, examples(1))]
    pub server_id: u32,
}
