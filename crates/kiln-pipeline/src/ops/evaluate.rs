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
    let bad = |at: &str, what: &str| {
        input(
            "the predictions".into(),
            format!("{}:{at}: {what}", path.display()),
        )
    };
    // The patch of one entry: a string, or none (null or missing: an empty prediction, as in
    // SWE-bench). A `patch` key without `model_patch` is a misnamed prediction, not an empty one.
    let patch_of = |value: &serde_json::Value, at: &str| -> Result<String, PipelineError> {
        match value.get("model_patch") {
            Some(serde_json::Value::String(patch)) => Ok(patch.clone()),
            Some(serde_json::Value::Null) => Ok(String::new()),
            None if value.get("patch").is_some() => Err(bad(
                at,
                "has `patch` but no `model_patch` (SWE-bench's predictions name the patch `model_patch`)",
            )),
            None => Ok(String::new()),
            Some(other) => Err(bad(
                at,
                &format!("`model_patch` is {}, not a string", kind(other)),
            )),
        }
    };
    let entry = |value: &serde_json::Value, at: &str| -> Result<(String, String), PipelineError> {
        let id = match value.get("instance_id") {
            Some(serde_json::Value::String(id)) => id.clone(),
            Some(other) => {
                return Err(bad(
                    at,
                    &format!("`instance_id` is {}, not a string", kind(other)),
                ));
            }
            None => return Err(bad(at, "missing `instance_id`")),
        };
        Ok((id, patch_of(value, at)?))
    };
    // Where each id was first seen: a second prediction for it is an error naming both.
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut out = BTreeMap::new();
    let mut add = |id: String, patch: String, at: &str| -> Result<(), PipelineError> {
        if let Some(first) = seen.get(&id) {
            return Err(bad(
                at,
                &format!("a second prediction for `{id}` (the first is at {first})"),
            ));
        }
        seen.insert(id.clone(), at.to_string());
        out.insert(id, patch);
        Ok(())
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('[')
        || trimmed.starts_with('{') && serde_json::from_str::<serde_json::Value>(&text).is_ok()
    {
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(&e.line().to_string(), &format!("not JSON: {e}")))?;
        match value {
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let at = format!("entry {}", i + 1);
                    let (id, patch) = entry(item, &at)?;
                    add(id, patch, &at)?;
                }
            }
            serde_json::Value::Object(map) if !map.contains_key("instance_id") => {
                for (id, item) in map {
                    let at = format!("key {id:?}");
                    let patch = patch_of(&item, &at)?;
                    add(id, patch, &at)?;
                }
            }
            single => {
                let (id, patch) = entry(&single, "1")?;
                add(id, patch, "1")?;
            }
        }
        return Ok(out);
    }
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = (i + 1).to_string();
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(&at, &format!("not JSON: {e}")))?;
        let (id, patch) = entry(&value, &at)?;
        add(id, patch, &at)?;
    }
    Ok(out)
}

/// The ids of `predictions` that are not among `held` (a release's instance ids), sorted.
#[must_use]
pub fn unknown_predictions<'a>(
    held: impl IntoIterator<Item = &'a str>,
    predictions: &BTreeMap<String, String>,
) -> Vec<String> {
    let held: BTreeSet<&str> = held.into_iter().collect();
    predictions
        .keys()
        .filter(|id| !held.contains(id.as_str()))
        .cloned()
        .collect()
}

/// A JSON value's kind with the value, for messages (`a number (7)`).
fn kind(value: &serde_json::Value) -> String {
    let shown: String = value.to_string().chars().take(40).collect();
    match value {
        serde_json::Value::Number(_) => format!("a number ({shown})"),
        serde_json::Value::Bool(_) => format!("a boolean ({shown})"),
        serde_json::Value::Array(_) => "a list".into(),
        serde_json::Value::Object(_) => "an object".into(),
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(_) => format!("a string ({shown})"),
    }
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
    pub only: Option<BTreeSet<kiln_schema::InstanceId>>,
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
                .is_none_or(|only| only.contains(&instance.instance_id))
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
    fn predictions_for_instances_the_release_lacks_are_named() {
        let predictions = BTreeMap::from([
            ("o__r-1".to_string(), "p".to_string()),
            ("o__r-2".to_string(), "p".to_string()),
        ]);
        assert_eq!(unknown_predictions(["o__r-1"], &predictions), ["o__r-2"]);
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
    fn mistakes_in_predictions_are_errors_naming_the_line() {
        for (text, expected) in [
            (
                "{\"instance_id\": \"a\", \"patch\": \"p\"}\n",
                ":1: has `patch` but no `model_patch`",
            ),
            (
                "{\"instance_id\": \"a\", \"model_patch\": \"p\"}\n{\"instance_id\": \"a\", \"model_patch\": \"q\"}\n",
                ":2: a second prediction for `a` (the first is at 1)",
            ),
            (
                "{\"instance_id\": 7, \"model_patch\": \"p\"}\n",
                ":1: `instance_id` is a number (7), not a string",
            ),
            (
                "{\"instance_id\": \"a\", \"model_patch\": 3}\n",
                ":1: `model_patch` is a number (3), not a string",
            ),
            (
                "[{\"instance_id\": \"a\", \"model_patch\": \"p\"}, {\"instance_id\": \"a\"}]",
                ":entry 2: a second prediction for `a` (the first is at entry 1)",
            ),
        ] {
            let error = predictions(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(expected), "{text}: {error}");
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
