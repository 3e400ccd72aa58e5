//! `GET /ui/api/lineage`: the dependency graph — sources, pipeline features,
//! on-demand features — laid out in layers, for the console to draw.
//!
//! A node's layer is the length of the longest path to it from a source (every
//! edge points to a later layer); within a layer, nodes are ordered by the mean
//! position of their neighbours (a few sweeps of the barycentre heuristic, which
//! keeps most edges short and uncrossed). The page only draws what this says.

use std::collections::HashMap;

use axum::extract::State;
use axum::response::Response;
use oka_core::Registry;
use oka_core::feature::{FeatureKind, Source};
use serde::Serialize;

use crate::state::AppState;

const NODE_W: f64 = 190.0;
const NODE_H: f64 = 30.0;
const GAP_X: f64 = 90.0;
const GAP_Y: f64 = 14.0;
const MARGIN: f64 = 16.0;
/// Barycentre sweeps (down and up count as one each).
const SWEEPS: usize = 6;

/// The graph, positioned.
#[derive(Debug, Serialize, PartialEq)]
pub struct Lineage {
    /// The drawing's size.
    pub width: f64,
    /// The drawing's size.
    pub height: f64,
    /// A node's size.
    pub node_w: f64,
    /// A node's size.
    pub node_h: f64,
    /// Sources first, then features in spec order.
    pub nodes: Vec<Node>,
    /// From an input to what it feeds.
    pub edges: Vec<Edge>,
}

/// A source or a feature.
#[derive(Debug, Serialize, PartialEq)]
pub struct Node {
    /// What it shows.
    pub label: String,
    /// `source`, `pipeline` or `on_demand`.
    pub kind: &'static str,
    /// The feature's name (features only).
    pub feature: Option<String>,
    /// Its layer.
    pub layer: usize,
    /// Its top-left corner.
    pub x: f64,
    /// Its top-left corner.
    pub y: f64,
}

/// A dependency: `from` (a node index) is read by `to`.
#[derive(Debug, Serialize, PartialEq)]
pub struct Edge {
    /// The input's node.
    pub from: usize,
    /// The reader's node.
    pub to: usize,
    /// How a pipeline input is read (`latest`, `range`, `last_n`); none from a source.
    pub query: Option<&'static str>,
}

/// `GET /ui/api/lineage`.
pub(super) async fn lineage(State(state): State<AppState>) -> Response {
    super::json(&layout(&state.shared.loaded.load().registry))
}

/// The source node a pipeline feature is written from.
fn source_of(source: Option<&Source>, feature: &str) -> (String, String) {
    match source {
        Some(Source::Kafka(k)) => (format!("kafka:{}", k.topic), format!("kafka · {}", k.topic)),
        Some(Source::Mock(_)) => (format!("mock:{feature}"), "mock source".to_owned()),
        None => ("ingest".to_owned(), "ingest / push".to_owned()),
    }
}

/// The registry's graph, laid out.
pub fn layout(registry: &Registry) -> Lineage {
    let features = registry.features();
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut sources: HashMap<String, usize> = HashMap::new();
    // Sources first, in the order their features come.
    for f in features {
        if let FeatureKind::Pipeline { source, .. } = &f.kind {
            let (id, label) = source_of(source.as_ref(), &f.name);
            sources.entry(id).or_insert_with(|| {
                nodes.push(node(label, "source", None, 0));
                nodes.len() - 1
            });
        }
    }
    let first_feature = nodes.len();
    let layers = feature_layers(registry);
    for (f, layer) in features.iter().zip(&layers) {
        let kind = if f.is_pipeline() {
            "pipeline"
        } else {
            "on_demand"
        };
        nodes.push(node(
            f.name.to_string(),
            kind,
            Some(f.name.to_string()),
            *layer,
        ));
    }
    for f in features {
        let to = first_feature + f.id;
        match &f.kind {
            FeatureKind::Pipeline { source, .. } => {
                let (id, _) = source_of(source.as_ref(), &f.name);
                let from = sources[&id];
                edges.push(Edge {
                    from,
                    to,
                    query: None,
                });
            }
            FeatureKind::OnDemand { dependencies, .. } => {
                for d in dependencies {
                    let from = first_feature + d.feature;
                    edges.push(Edge {
                        from,
                        to,
                        query: Some(d.query.name()),
                    });
                }
            }
        }
    }
    place(&mut nodes, &edges);
    let width = nodes.iter().map(|n| n.x + NODE_W).fold(0.0, f64::max) + MARGIN;
    let height = nodes.iter().map(|n| n.y + NODE_H).fold(0.0, f64::max) + MARGIN;
    Lineage {
        width,
        height,
        node_w: NODE_W,
        node_h: NODE_H,
        nodes,
        edges,
    }
}

fn node(label: String, kind: &'static str, feature: Option<String>, layer: usize) -> Node {
    Node {
        label,
        kind,
        feature,
        layer,
        x: 0.0,
        y: 0.0,
    }
}

/// Each feature's layer: 1 for a pipeline feature (its source is 0), one more
/// than its deepest input for an on-demand one. The registry is acyclic.
fn feature_layers(registry: &Registry) -> Vec<usize> {
    let features = registry.features();
    let mut layers: Vec<Option<usize>> = vec![None; features.len()];
    for f in features {
        // An explicit stack, not recursion: a long chain of features is no risk.
        let mut stack = vec![f.id];
        while let Some(&id) = stack.last() {
            if layers[id].is_some() {
                stack.pop();
                continue;
            }
            match &features[id].kind {
                FeatureKind::Pipeline { .. } => {
                    layers[id] = Some(1);
                    stack.pop();
                }
                FeatureKind::OnDemand { dependencies, .. } => {
                    let pending: Vec<_> = dependencies
                        .iter()
                        .map(|d| d.feature)
                        .filter(|d| layers[*d].is_none())
                        .collect();
                    if pending.is_empty() {
                        let deepest = dependencies
                            .iter()
                            .filter_map(|d| layers[d.feature])
                            .max()
                            .unwrap_or(0);
                        layers[id] = Some(deepest + 1);
                        stack.pop();
                    } else {
                        stack.extend(pending);
                    }
                }
            }
        }
    }
    layers.into_iter().map(|l| l.unwrap_or(1)).collect()
}

/// Orders each layer by the barycentre of its neighbours and sets positions.
fn place(nodes: &mut [Node], edges: &[Edge]) {
    let depth = nodes.iter().map(|n| n.layer).max().unwrap_or(0) + 1;
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (i, n) in nodes.iter().enumerate() {
        order[n.layer].push(i);
    }
    let mut pos = vec![0.0; nodes.len()];
    let set_pos = |order: &[Vec<usize>], pos: &mut [f64]| {
        for layer in order {
            for (i, &n) in layer.iter().enumerate() {
                pos[n] = i as f64;
            }
        }
    };
    set_pos(&order, &mut pos);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        for layer in &mut order {
            let mut keyed: Vec<(f64, usize)> = layer
                .iter()
                .map(|&n| {
                    let near = edges.iter().filter_map(|e| match down {
                        true if e.to == n => Some(pos[e.from]),
                        false if e.from == n => Some(pos[e.to]),
                        _ => None,
                    });
                    let (sum, count) = near.fold((0.0, 0usize), |(s, c), p| (s + p, c + 1));
                    (
                        if count == 0 {
                            pos[n]
                        } else {
                            sum / count as f64
                        },
                        n,
                    )
                })
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            *layer = keyed.into_iter().map(|(_, n)| n).collect();
            for (i, &n) in layer.iter().enumerate() {
                pos[n] = i as f64;
            }
        }
    }
    let tallest = order.iter().map(Vec::len).max().unwrap_or(0) as f64;
    for (l, layer) in order.iter().enumerate() {
        // Shorter layers are centred on the tallest.
        let offset = (tallest - layer.len() as f64) * (NODE_H + GAP_Y) / 2.0;
        for (i, &n) in layer.iter().enumerate() {
            nodes[n].x = MARGIN + l as f64 * (NODE_W + GAP_X);
            nodes[n].y = MARGIN + offset + i as f64 * (NODE_H + GAP_Y);
        }
    }
}

#[cfg(test)]
mod tests {
    use oka_core::NativeUdfs;

    use super::*;

    const SPEC: &str = r#"
version: 1
entities:
  E: {keys: {id: string}, timestamp: ts, fields: {v: float}}
features:
  a: {kind: pipeline, entity: E}
  b: {kind: pipeline, entity: E, source: {kafka: {topic: t1, format: json}}}
  c:
    kind: on_demand
    entity: E
    dependencies: [a, b]
    udf: {expr: {v: "a.v + b.v"}}
  d:
    kind: on_demand
    entity: E
    dependencies: [c, {feature: a, query: last_n, n: 3}]
    udf: {expr: {v: "c.v"}}
"#;

    #[test]
    fn every_feature_and_dependency_is_drawn_left_to_right() {
        let registry = Registry::from_yaml("t.yaml", SPEC, &NativeUdfs::new()).unwrap();
        let g = layout(&registry);
        let names: Vec<_> = g
            .nodes
            .iter()
            .filter_map(|n| n.feature.as_deref())
            .collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        let labels: Vec<_> = g
            .nodes
            .iter()
            .filter(|n| n.kind == "source")
            .map(|n| n.label.as_str())
            .collect();
        assert_eq!(labels, ["ingest / push", "kafka · t1"]);
        // Two sources, four dependencies.
        assert_eq!(g.edges.len(), 2 + 4);
        let layer = |name: &str| {
            g.nodes
                .iter()
                .find(|n| n.feature.as_deref() == Some(name))
                .unwrap()
                .layer
        };
        assert_eq!(
            [layer("a"), layer("b"), layer("c"), layer("d")],
            [1, 1, 2, 3]
        );
        for e in &g.edges {
            let (from, to) = (&g.nodes[e.from], &g.nodes[e.to]);
            assert!(
                from.x + g.node_w < to.x,
                "{} → {} runs right",
                from.label,
                to.label
            );
        }
        assert!(g.edges.iter().any(|e| e.query == Some("last_n")));
        // No two nodes overlap.
        for (i, a) in g.nodes.iter().enumerate() {
            for b in &g.nodes[i + 1..] {
                let apart = (a.x - b.x).abs() >= g.node_w || (a.y - b.y).abs() >= g.node_h;
                assert!(apart, "{} and {} overlap", a.label, b.label);
            }
            assert!(a.x + g.node_w <= g.width && a.y + g.node_h <= g.height);
        }
    }
}
