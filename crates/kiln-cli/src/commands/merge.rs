//! `kiln merge`: the shards of a split run joined into one run, then (with --export) exported.

use std::sync::Arc;
use std::time::Duration;

use kiln_core::Event;
use kiln_pipeline::{PipelineError, RunOptions, RunSelection};

use super::Context;
use crate::cli::MergeArgs;
use crate::common::{load, print_json, print_summary, run_all};
use crate::exit;
use crate::failure::Failure;

/// How often `--wait` looks at the shards again.
const WAIT_INTERVAL: Duration = Duration::from_secs(30);

/// Merges, waiting for the shards when asked, and exports when asked.
pub async fn run(args: MergeArgs, cx: &Context) -> Result<u8, Failure> {
    let mut pipeline = load(&cx.config)?;
    if let Some(month) = &args.month {
        pipeline = pipeline
            .for_month(month)
            .map_err(|e| Failure::new(exit::CONFIG, format!("failed to merge: {e}")))?;
    }
    let outcome = loop {
        match kiln_pipeline::merge(&pipeline, args.shards) {
            Ok(outcome) => break outcome,
            Err(PipelineError::Merge {
                problems,
                unfinished_only: true,
                ..
            }) if args.wait => {
                cx.reporter.report(Event::Note {
                    message: format!(
                        "waiting for {} shard(s): {}",
                        problems.len(),
                        problems.first().cloned().unwrap_or_default()
                    ),
                });
                tokio::time::sleep(WAIT_INTERVAL).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    if cx.json {
        print_json(&serde_json::json!({
            "run_id": outcome.run_id,
            "run_dir": outcome.run_dir,
            "shards": outcome.shards,
            "stages": outcome.stages,
        }))?;
    } else {
        println!(
            "merged {} shards into run {} ({})",
            outcome.shards.len(),
            outcome.run_id,
            outcome.run_dir.display()
        );
        for (stage, rows) in &outcome.stages {
            println!("  {stage:<10} {rows:>6} rows");
        }
    }
    if !outcome.export_left {
        return Ok(exit::OK);
    }
    if !args.export {
        if !cx.json {
            println!("next: `kiln run` exports the merged run");
        }
        return Ok(exit::OK);
    }
    let runner = run_all(
        pipeline,
        &RunSelection::Id(outcome.run_id),
        RunOptions::default(),
        Arc::clone(&cx.reporter),
    )
    .await?;
    print_summary(&runner, cx.json)?;
    Ok(exit::OK)
}
