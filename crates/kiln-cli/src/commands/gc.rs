//! `kiln gc`: remove the dataset's environment images that nothing refers to.

use super::Context;
use crate::cli::GcArgs;
use crate::common::{connect, load, print_json};
use crate::exit;
use crate::failure::Failure;

/// Plans the removal, prints it, and (unless --dry-run) removes.
pub async fn run(args: GcArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    let runtime = connect(&cx.reporter).await?;
    let plan = kiln_pipeline::ops::gc::plan(
        &pipeline,
        runtime.as_ref(),
        args.keep_last,
        args.orphans,
        args.min_age,
    )
    .await?;
    let megabytes = |bytes: i64| bytes as f64 / 1e6;
    if cx.json {
        print_json(&serde_json::json!({
            "dry_run": args.dry_run,
            "remove": plan.remove,
            "bytes": plan.bytes(),
            "freed_bytes": plan.freed,
            "kept": plan.kept,
            "kept_runs": plan.kept_runs,
            "in_use": plan.in_use,
        }))?;
    } else {
        let verb = if args.dry_run {
            "would remove"
        } else {
            "remove"
        };
        for garbage in &plan.remove {
            let name = if garbage.tags.is_empty() {
                garbage.id.clone()
            } else {
                garbage.tags.join(", ")
            };
            println!(
                "{verb} {name} ({:.1} MB, {})",
                megabytes(garbage.size),
                garbage.reason
            );
        }
    }
    if !args.dry_run {
        kiln_pipeline::ops::gc::remove(runtime.as_ref(), &plan).await?;
    }
    if !cx.json {
        // What the layers of the images that go add up to, or, when the engine cannot say,
        // their sizes in full (shared layers go only with their last image).
        let bytes = match plan.freed {
            Some(freed) => format!(
                "{:.1} MB {}",
                megabytes(freed),
                if args.dry_run { "to free" } else { "freed" }
            ),
            None => format!(
                "{:.1} MB at most (shared layers go with their last image)",
                megabytes(plan.bytes())
            ),
        };
        println!(
            "{} {} image(s), {bytes}; {} kept (releases, runs {}){}",
            if args.dry_run {
                "would remove"
            } else {
                "removed"
            },
            plan.remove.len(),
            plan.kept,
            if plan.kept_runs.is_empty() {
                "none".to_string()
            } else {
                plan.kept_runs.join(", ")
            },
            if plan.in_use > 0 {
                format!(
                    "; {} left that a container or a build in progress may stand on",
                    plan.in_use
                )
            } else {
                String::new()
            }
        );
    }
    Ok(exit::OK)
}
