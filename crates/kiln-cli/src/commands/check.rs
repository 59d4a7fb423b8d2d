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

/// `kiln graph`: the stage graph in DOT.
pub fn graph(cx: &Context) -> Result<u8, Failure> {
    print!("{}", load(&cx.config)?.to_dot());
    Ok(exit::OK)
}
