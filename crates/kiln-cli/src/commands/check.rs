//! `kiln check` and `kiln graph`.

use super::Context;
use crate::common::{check_environment, load, print_json};
use crate::exit;
use crate::failure::Failure;

/// `kiln check`: the config and what it needs from this machine.
pub fn check(cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    check_environment(&pipeline, None)?;
    if cx.json {
        print_json(
            &serde_json::json!({"config": pipeline.path, "ok": true, "nodes": pipeline.nodes}),
        )?;
    } else {
        println!(
            "{}: ok ({} sources and stages)",
            pipeline.path.display(),
            pipeline.nodes.len()
        );
    }
    Ok(exit::OK)
}

/// `kiln graph`: the stage graph in DOT, or under `--json` as nodes and edges.
pub fn graph(cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    if cx.json {
        let nodes: Vec<serde_json::Value> = pipeline
            .nodes
            .iter()
            .map(|n| serde_json::json!({"name": n.name, "kind": n.kind.to_string()}))
            .collect();
        let edges: Vec<serde_json::Value> = pipeline
            .nodes
            .iter()
            .flat_map(|n| {
                n.inputs
                    .iter()
                    .map(move |input| serde_json::json!({"from": input, "to": n.name}))
            })
            .collect();
        print_json(&serde_json::json!({"nodes": nodes, "edges": edges}))?;
    } else {
        print!("{}", pipeline.to_dot());
    }
    Ok(exit::OK)
}
