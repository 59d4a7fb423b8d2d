//! `kiln evaluate`: predicted patches against a release.

use std::path::PathBuf;
use std::sync::Arc;

use kiln_core::runtime::LABEL_RUN;
use kiln_pipeline::PipelineError;

use super::Context;
use crate::cli::EvaluateArgs;
use crate::common::{connect, print_json, shutdown_signal};
use crate::exit;
use crate::failure::Failure;

/// Evaluates the predictions and writes the report.
pub async fn run(args: EvaluateArgs, cx: &Context) -> Result<u8, Failure> {
    let (reporter, json) = (Arc::clone(&cx.reporter), cx.json);
    use kiln_pipeline::ops::evaluate as eval;
    let timeout = kiln_core::config::parse_duration(&args.timeout)
        .map_err(|e| Failure::new(exit::USAGE, format!("--timeout: {e}")))?;
    let instances = eval::read_dataset(&args.dataset)?;
    let predictions = eval::read_predictions(&args.predictions)?;
    // Predictions for instances the release does not hold are never evaluated: a typo or the
    // wrong release, which must not pass as "unresolved".
    let unknown = eval::unknown_predictions(
        instances.iter().map(|i| i.instance_id.as_str()),
        &predictions,
    );
    if !unknown.is_empty() {
        let shown: Vec<&str> = unknown.iter().take(10).map(String::as_str).collect();
        eprintln!(
            "warning: {} of {} predictions name instances {} does not hold, and are not evaluated: {}{}",
            unknown.len(),
            predictions.len(),
            args.dataset.display(),
            shown.join(", "),
            if unknown.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        );
    }
    let engine = connect(&cx.reporter).await?;
    let stamp = kiln_store::time_id();
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("evaluation-{stamp}")));
    std::fs::create_dir_all(&output).map_err(|e| {
        Failure::new(
            exit::STORE,
            format!("failed to create {}: {e}", output.display()),
        )
    })?;
    let options = eval::EvaluateOptions {
        docker: kiln_core::config::DockerSettings::default(),
        concurrency: args.concurrency,
        timeout,
        network: if args.network {
            kiln_core::NetworkMode::Bridge
        } else {
            kiln_core::NetworkMode::None
        },
        log_dir: output.join("logs"),
        run_label: format!("evaluate/{stamp}"),
        only: (!args.only.is_empty()).then(|| args.only.into_iter().collect()),
    };
    let label = options.run_label.clone();
    let work = eval::evaluate_all(
        Arc::clone(&engine),
        instances,
        &predictions,
        &options,
        reporter,
    );
    let evaluations = tokio::select! {
        result = work => result?,
        () = shutdown_signal() => {
            let removed = engine.remove_labelled(LABEL_RUN, &label).await.unwrap_or(0);
            return Err(Failure::new(exit::INTERRUPTED, format!("interrupted; removed {removed} container(s)")));
        }
    };
    let summary = eval::summarize(&evaluations, predictions.len());
    let report = serde_json::json!({"summary": summary, "instances": evaluations, "unknown_predictions": unknown});
    let report_path = output.join("report.json");
    let text = serde_json::to_vec_pretty(&report)
        .map_err(|e| Failure::new(exit::INTERNAL, e.to_string()))?;
    kiln_store::write_atomic(&report_path, &text)
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    if json {
        print_json(&report)?;
        return Ok(exit::OK);
    }
    for e in &evaluations {
        println!(
            "  {:<28} {:<20} {}",
            e.instance_id,
            e.resolution.as_str(),
            e.reason.as_deref().unwrap_or("")
        );
    }
    println!(
        "{} instances, {} predicted: {} ({:.1}% resolved)\nreport: {}",
        summary.total,
        summary.predicted,
        kiln_pipeline::counts_line(
            &summary
                .counts
                .iter()
                .map(|(k, v)| (k.clone(), *v as u64))
                .collect()
        ),
        summary.resolved_rate * 100.0,
        report_path.display()
    );
    Ok(exit::OK)
}
