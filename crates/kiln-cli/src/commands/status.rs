//! `kiln status`: where the stages of a run stand.

use kiln_pipeline::RunSelection;

use super::Context;
use crate::cli::StatusArgs;
use crate::common::{load, print_json};
use crate::exit;
use crate::failure::Failure;

/// Prints the run's stages.
pub fn run(args: StatusArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    let selection = args.run.map_or(RunSelection::Latest, RunSelection::Id);
    let run = kiln_pipeline::open_run(&pipeline, &selection)?;
    let status = kiln_pipeline::run_status(&pipeline, &run)?;
    if cx.json {
        print_json(&serde_json::to_value(&status).unwrap_or_default())?;
        return Ok(exit::OK);
    }
    println!(
        "run {} ({:?}) in {}",
        status.run_id,
        status.status,
        status.run_dir.display()
    );
    for stage in &status.stages {
        let name = &stage.stage;
        match &stage.manifest {
            Some(m) => {
                println!(
                    "  {name:<10} {:<10} {:>5} rows  {}",
                    format!("{:?}", m.status).to_lowercase(),
                    m.rows,
                    kiln_pipeline::counts_line(&m.counts)
                );
                if !m.stats.is_empty() {
                    println!("  {:<10} {}", "", kiln_pipeline::stats_line(&m.stats));
                }
            }
            None => println!("  {name:<10} not started"),
        }
    }
    if let Some(spent) = &status.lm {
        println!("  {:<10} {}", "lm (run)", kiln_pipeline::spent_line(spent));
    }
    Ok(exit::OK)
}
