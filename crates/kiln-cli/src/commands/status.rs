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
    if args.shards || args.root.is_some() {
        return shards(&pipeline, args.root.as_deref(), cx);
    }
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

/// Prints every split of the dataset: each shard's run and stages, the stragglers, the totals.
fn shards(
    pipeline: &kiln_core::config::Pipeline,
    root: Option<&std::path::Path>,
    cx: &Context,
) -> Result<u8, Failure> {
    let sets = kiln_pipeline::shard_statuses(pipeline, root)?;
    if cx.json {
        print_json(&serde_json::to_value(&sets).unwrap_or_default())?;
        return Ok(exit::OK);
    }
    if sets.is_empty() {
        println!(
            "no split runs of dataset {} under {}",
            pipeline.dataset.name,
            root.unwrap_or(pipeline.home_root()).display()
        );
        return Ok(exit::OK);
    }
    for set in &sets {
        let finished = set.shards.iter().filter(|s| s.finished()).count();
        println!(
            "{} shards in {}: {finished} finished",
            set.count,
            set.dir.display()
        );
        for shard in &set.shards {
            let Some(run) = &shard.run else {
                println!("  {:<6} not started", shard.shard.to_string());
                continue;
            };
            let stages: Vec<String> = run
                .stages
                .iter()
                .filter_map(|s| {
                    let m = s.manifest.as_ref()?;
                    let mark = if m.status == kiln_store::Status::Complete {
                        ""
                    } else {
                        "…"
                    };
                    Some(format!("{} {}{mark}", s.stage, m.rows))
                })
                .collect();
            let estimate = shard
                .estimated_seconds
                .map(|s| format!("  (planned {s:.0} s)"))
                .unwrap_or_default();
            println!(
                "  {:<6} {:<10} run {}  {}{estimate}",
                shard.shard.to_string(),
                format!("{:?}", run.status).to_lowercase(),
                run.run_id,
                stages.join("  "),
            );
        }
        let totals: Vec<String> = set
            .totals
            .iter()
            .map(|(stage, rows, done)| format!("{stage} {rows} ({done}/{} done)", set.count))
            .collect();
        println!("  totals  {}", totals.join("  "));
        if !set.stragglers.is_empty() && finished > 0 {
            let names: Vec<String> = set.stragglers.iter().map(ToString::to_string).collect();
            println!("  behind  shard(s) {}", names.join(", "));
        }
    }
    Ok(exit::OK)
}
