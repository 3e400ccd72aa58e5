//! The OpenAPI documents: docs/ holds exactly what the code generates, the admin
//! port serves it, and it names every route, status and error code.

use std::path::Path;

use oka_core::ErrorCode;
use serde_json::Value as Json;

use crate::{body_text, fixture, get, send};

const REGENERATE: &str = "cargo run -p oka-cli -- openapi";

/// CI's check that the committed documents are not stale.
#[test]
fn docs_hold_the_documents_the_code_generates() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    for (file, generated) in [
        ("openapi.json", oka_server::serving_document()),
        ("openapi-admin.json", oka_server::admin_document()),
    ] {
        let committed = std::fs::read_to_string(docs.join(file)).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/{file} is stale: it is not what the code generates. Regenerate both documents with `{REGENERATE}` (it writes docs/openapi.json and docs/openapi-admin.json) and commit them."
        );
    }
}

#[tokio::test]
async fn the_admin_port_serves_both_documents() {
    let fx = fixture().await;
    for (uri, generated) in [
        ("/openapi.json", oka_server::serving_document()),
        ("/openapi-admin.json", oka_server::admin_document()),
    ] {
        let (status, resp) = send(&fx.admin, get(uri)).await;
        assert_eq!(status, 200, "{uri}");
        assert_eq!(resp.headers()["content-type"], "application/json");
        assert_eq!(body_text(resp).await, generated, "{uri}");
    }
    // Not on the serving port.
    let (status, _) = send(&fx.app, get("/openapi.json")).await;
    assert_eq!(status, 404);
}

fn doc(text: &str) -> Json {
    let doc: Json = serde_json::from_str(text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(text.ends_with("}\n"));
    doc
}

/// The statuses an operation documents.
fn statuses(doc: &Json, path: &str, method: &str) -> Vec<String> {
    let responses = doc["paths"][path][method]["responses"].as_object();
    let responses = responses.unwrap_or_else(|| panic!("no {method} {path}"));
    responses.keys().cloned().collect()
}

#[test]
fn the_serving_document_names_every_route_status_and_code() {
    let doc = doc(oka_server::serving_document());
    let paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/v1/features",
            "/on_demand_compute",
            "/on_demand_compute/{json}",
            "/v1/ingest"
        ]
    );
    let all = [
        "200", "400", "401", "403", "404", "408", "409", "413", "500", "503", "504",
    ];
    assert_eq!(statuses(&doc, "/v1/features", "post"), all);
    assert_eq!(statuses(&doc, "/on_demand_compute", "post"), all);
    assert_eq!(
        statuses(&doc, "/on_demand_compute/{json}", "get"),
        [
            "200", "400", "401", "403", "404", "409", "413", "414", "500", "503", "504"
        ]
    );
    assert_eq!(
        statuses(&doc, "/v1/features", "get"),
        ["200", "401", "403", "503"]
    );
    assert_eq!(
        statuses(&doc, "/v1/ingest", "post"),
        [
            "200", "400", "401", "403", "404", "408", "409", "413", "500", "503", "504"
        ]
    );

    // The code enum is the code's list of codes.
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        doc["components"]["schemas"]["ErrorCode"]["enum"],
        serde_json::json!(codes)
    );

    // Errors carry their headers, and Volga's routes answer them as text as well.
    let op = &doc["paths"]["/on_demand_compute"]["post"]["responses"];
    assert_eq!(op["503"]["headers"]["Retry-After"]["required"], true);
    assert_eq!(op["401"]["headers"]["WWW-Authenticate"]["required"], true);
    assert!(op["400"]["content"]["text/plain; charset=utf-8"].is_object());
    assert!(op["400"]["content"]["application/json"].is_object());
    let op = &doc["paths"]["/v1/features"]["post"]["responses"];
    assert!(op["400"]["content"]["text/plain; charset=utf-8"].is_null());
    assert_eq!(op["200"]["headers"]["server-timing"]["required"], true);
    // Each error response lists the codes it carries.
    let described = op["504"]["description"].as_str().unwrap();
    assert!(described.contains("`store_timeout`") && described.contains("`deadline_exceeded`"));
}

#[test]
fn the_admin_document_names_every_admin_route() {
    let doc = doc(oka_server::admin_document());
    let paths: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/healthz",
            "/readyz",
            "/metrics",
            "/stats",
            "/admin/reload",
            "/openapi.json",
            "/openapi-admin.json"
        ]
    );
    assert_eq!(statuses(&doc, "/readyz", "get"), ["200", "503"]);
    assert_eq!(
        statuses(&doc, "/admin/reload", "post"),
        ["200", "400", "401", "403", "429", "500"]
    );
    let metrics = &doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"];
    assert!(metrics["text/plain; charset=utf-8"].is_object());
    assert!(metrics["application/openmetrics-text; version=1.0.0; charset=utf-8"].is_object());
}
