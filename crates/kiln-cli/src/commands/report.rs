//! `kiln report`: a run on one HTML page.

use kiln_pipeline::{PipelineError, RunSelection};

use super::Context;
use crate::cli::ReportArgs;
use crate::common::{load, print_json};
use crate::exit;
use crate::failure::Failure;

/// Writes the page.
pub fn run(args: ReportArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    let selection = args.run.map_or(RunSelection::Latest, RunSelection::Id);
    let run = kiln_pipeline::open_run(&pipeline, &selection)?;
    let path = args.output.unwrap_or_else(|| run.dir().join("report.html"));
    let page = kiln_pipeline::ops::report::render(&pipeline, &run, &path)?;
    kiln_store::write_atomic(&path, page.as_bytes())
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    if cx.json {
        print_json(&serde_json::json!({"run_id": run.run_id(), "report": path}))?;
    } else {
        println!("{}", path.display());
    }
    Ok(exit::OK)
}
