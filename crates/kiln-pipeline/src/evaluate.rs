//! `kiln evaluate`: predicted patches against a released dataset.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kiln_core::config::DockerSettings;
use kiln_core::runtime::{LABEL_MANAGED, LABEL_RUN};
use kiln_core::{ContainerRuntime, Event, NetworkMode, Reporter};
use kiln_schema::ReleaseInstance;
use kiln_validate::{EvaluateRequest, Evaluation, Resolution};
use serde::Serialize;
use tokio::task::JoinSet;

use crate::error::PipelineError;

fn input(what: String, message: impl std::fmt::Display) -> PipelineError {
    PipelineError::Input {
        what,
        message: message.to_string(),
    }
}

/// Reads the instances of a release: a release directory (every `data/*.parquet`), a `data/`
/// directory, or one Parquet file.
///
/// # Errors
/// When nothing can be read.
pub fn read_dataset(path: &Path) -> Result<Vec<ReleaseInstance>, PipelineError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let data = if path.join("data").is_dir() {
            path.join("data")
        } else {
            path.to_path_buf()
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
            .map_err(|e| input(format!("the release {}", data.display()), e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(input(
            format!("the release {}", path.display()),
            "it holds no Parquet files",
        ));
    }
    let mut rows = Vec::new();
    for file in files {
        // A release comes from anyone; its ids name the log directories of the evaluation, and
        // reading checks them: a release whose ids could name paths outside the output
        // directory is refused whole.
        let read = kiln_store::read_parquet::<ReleaseInstance>(&file)
            .map_err(|e| input(format!("the release {}", file.display()), e))?;
        rows.extend(read);
    }
    Ok(rows)
}

/// Reads predictions in SWE-bench's forms: a JSON array of `{instance_id, model_patch}`, a JSON
/// object `{instance_id: {model_patch}}`, or JSONL of `{instance_id, model_patch}`.
///
/// # Errors
/// An unreadable file, or a malformed entry (with its line).
pub fn read_predictions(path: &Path) -> Result<BTreeMap<String, String>, PipelineError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| input(format!("the predictions {}", path.display()), e))?;
    let bad = |line: usize, what: &str| {
        input(
            "the predictions".into(),
            format!("{}:{line}: {what}", path.display()),
        )
    };
    let entry =
        |value: &serde_json::Value, line: usize| -> Result<(String, String), PipelineError> {
            let id = value["instance_id"]
                .as_str()
                .ok_or_else(|| bad(line, "missing `instance_id`"))?;
            // A null or missing patch is an empty prediction, as in SWE-bench.
            let patch = value["model_patch"].as_str().unwrap_or_default();
            Ok((id.to_string(), patch.to_string()))
        };
    let trimmed = text.trim_start();
    let mut out = BTreeMap::new();
    if trimmed.starts_with('[')
        || trimmed.starts_with('{') && serde_json::from_str::<serde_json::Value>(&text).is_ok()
    {
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| bad(e.line(), &format!("not JSON: {e}")))?;
        match value {
            serde_json::Value::Array(items) => {
                for item in &items {
                    let (id, patch) = entry(item, 1)?;
                    out.insert(id, patch);
                }
            }
            serde_json::Value::Object(map) if !map.contains_key("instance_id") => {
                for (id, item) in map {
                    let patch = item["model_patch"].as_str().unwrap_or_default().to_string();
                    out.insert(id, patch);
                }
            }
            single => {
                let (id, patch) = entry(&single, 1)?;
                out.insert(id, patch);
            }
        }
        return Ok(out);
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(i + 1, &format!("not JSON: {e}")))?;
        let (id, patch) = entry(&value, i + 1)?;
        out.insert(id, patch);
    }
    Ok(out)
}

/// Counts by resolution, and the resolved share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvaluationSummary {
    /// Instances evaluated.
    pub total: usize,
    /// Instances the predictions name.
    pub predicted: usize,
    /// Count per resolution.
    pub counts: BTreeMap<String, usize>,
    /// Resolved instances over all instances.
    pub resolved_rate: f64,
}

/// Summarises evaluations.
#[must_use]
pub fn summarize(evaluations: &[Evaluation], predicted: usize) -> EvaluationSummary {
    let mut counts = BTreeMap::new();
    for e in evaluations {
        *counts.entry(e.resolution.as_str().to_string()).or_insert(0) += 1;
    }
    let resolved = evaluations
        .iter()
        .filter(|e| e.resolution == Resolution::Resolved)
        .count();
    let resolved_rate = if evaluations.is_empty() {
        0.0
    } else {
        resolved as f64 / evaluations.len() as f64
    };
    EvaluationSummary {
        total: evaluations.len(),
        predicted,
        counts,
        resolved_rate,
    }
}

/// Settings of one evaluation.
#[derive(Debug, Clone)]
pub struct EvaluateOptions {
    /// Container limits.
    pub docker: DockerSettings,
    /// Instances evaluated at once.
    pub concurrency: usize,
    /// Timeout of each test run.
    pub timeout: Duration,
    /// Network of the test containers.
    pub network: NetworkMode,
    /// Where logs go (`<dir>/<stem>/evaluate.log`, the stem being the id's
    /// [`InstanceId::file_stem`]).
    pub log_dir: PathBuf,
    /// Label value marking this evaluation's containers.
    pub run_label: String,
    /// Only these instances, when set.
    pub only: Option<BTreeSet<String>>,
}

/// Evaluates every instance of `instances` (or `options.only`) against `predictions`.
///
/// # Errors
/// Only an unreachable engine or a failed worker.
pub async fn evaluate_all(
    runtime: Arc<dyn ContainerRuntime>,
    instances: Vec<ReleaseInstance>,
    predictions: &BTreeMap<String, String>,
    options: &EvaluateOptions,
    reporter: Arc<dyn Reporter>,
) -> Result<Vec<Evaluation>, PipelineError> {
    let instances: Vec<ReleaseInstance> = instances
        .into_iter()
        .filter(|instance| {
            options
                .only
                .as_ref()
                .is_none_or(|only| only.contains(instance.instance_id.as_str()))
        })
        .collect();
    reporter.report(Event::StageStarted {
        stage: "evaluate".into(),
        total: instances.len() as u64,
        done: 0,
    });
    let labels = BTreeMap::from([
        (LABEL_MANAGED.to_string(), "1".to_string()),
        (LABEL_RUN.to_string(), options.run_label.clone()),
    ]);
    let mut pending = instances.into_iter();
    let mut running: JoinSet<Result<Evaluation, kiln_core::RuntimeError>> = JoinSet::new();
    let spawn = |running: &mut JoinSet<_>, instance: ReleaseInstance| {
        reporter.report(Event::ItemStarted {
            stage: "evaluate".into(),
            item: instance.instance_id.to_string(),
        });
        let request = EvaluateRequest {
            model_patch: predictions.get(instance.instance_id.as_str()).cloned(),
            log_dir: options.log_dir.join(instance.instance_id.file_stem()),
            instance,
            docker: options.docker.clone(),
            network: options.network,
            timeout: options.timeout,
            labels: labels.clone(),
        };
        let runtime = Arc::clone(&runtime);
        running.spawn(async move { kiln_validate::evaluate(runtime, &request).await });
    };
    for instance in pending.by_ref().take(options.concurrency.max(1)) {
        spawn(&mut running, instance);
    }
    let mut out = Vec::new();
    while let Some(joined) = running.join_next().await {
        let evaluation =
            joined.map_err(|e| PipelineError::Internal(format!("a worker task failed: {e}")))??;
        reporter.report(Event::ItemFinished {
            stage: "evaluate".into(),
            item: evaluation.instance_id.clone(),
            outcome: evaluation.resolution.as_str().into(),
            seconds: evaluation.seconds,
        });
        out.push(evaluation);
        if let Some(next) = pending.next() {
            spawn(&mut running, next);
        }
    }
    out.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predictions(text: &str) -> Result<BTreeMap<String, String>, PipelineError> {
        let tmp =
            tempfile::NamedTempFile::new().map_err(|e| PipelineError::Internal(e.to_string()))?;
        std::fs::write(tmp.path(), text).map_err(|e| PipelineError::Internal(e.to_string()))?;
        read_predictions(tmp.path())
    }

    #[test]
    fn every_prediction_form_reads() {
        let expected = BTreeMap::from([
            ("a".to_string(), "p".to_string()),
            ("b".to_string(), String::new()),
        ]);
        let forms = [
            r#"[{"instance_id": "a", "model_patch": "p"}, {"instance_id": "b", "model_patch": null}]"#,
            r#"{"a": {"model_patch": "p"}, "b": {"model_patch": ""}}"#,
            "{\"instance_id\": \"a\", \"model_patch\": \"p\"}\n\n{\"instance_id\": \"b\"}\n",
        ];
        for form in forms {
            assert_eq!(predictions(form).ok(), Some(expected.clone()), "{form}");
        }
    }

    #[test]
    fn a_bad_line_is_named() {
        let error = predictions("{\"instance_id\": \"a\"}\n{oops\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains(":2: not JSON"), "{error}");
    }
}
