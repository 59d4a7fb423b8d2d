//! `kiln report`: one HTML page about a run, with no external assets. The figures are drawn by
//! the page's own script (SVG) from the run's data, which the page carries as JSON
//! (`<script type="application/json" id="kiln-data">`), so the same numbers are there for
//! machines. Each figure marks itself `data-drawn` with the bars it drew, and the body says
//! how many figures were drawn (`data-plots`), or the script's error (`data-error`).

use std::collections::BTreeMap;
use std::path::Path;

use kiln_core::config::{NodeKind, Pipeline};
use kiln_schema::{Candidate, EnvironmentRecord};
use kiln_store::RunStore;
use serde_json::{Value, json};

use crate::error::PipelineError;
use crate::release::{ReleaseManifest, run_releases};
use crate::stages::WALL_SECONDS;
use crate::summary::{InstanceState, funnel, instance_summaries, rows};

/// The page, with `{{TITLE}}` and `{{DATA}}` to fill in.
const TEMPLATE: &str = include_str!("report.html");

/// Instances shown in the time figure (the slowest).
const MAX_INSTANCES: usize = 60;

/// Escapes text for HTML.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The figures' data, read from the run.
///
/// # Errors
/// When a stage table cannot be read.
pub fn report_data(pipeline: &Pipeline, run: &RunStore) -> Result<Value, PipelineError> {
    let funnel = funnel(pipeline, run)?;
    let released: usize = run_releases(pipeline, run)
        .iter()
        .filter_map(|dir| ReleaseManifest::read(dir).ok())
        .filter_map(|m| m.splits.get(&m.main_split).map(|s| s.rows))
        .sum();
    let language_of: BTreeMap<String, String> = rows::<Candidate>(pipeline, run, NodeKind::Ingest)?
        .into_iter()
        .filter_map(|c| Some((c.instance_id.to_string(), c.language?.to_lowercase())))
        .chain(
            rows::<EnvironmentRecord>(pipeline, run, NodeKind::Launch)?
                .into_iter()
                .filter(|e| !e.language.is_empty())
                .map(|e| (e.instance_id.to_string(), e.language)),
        )
        .collect();
    let summaries = instance_summaries(pipeline, run)?;
    let mut languages: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut instances = Vec::new();
    let mut builders: BTreeMap<String, u64> = BTreeMap::new();
    for s in &summaries {
        let language = language_of
            .get(s.instance_id.as_str())
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        *languages
            .entry(language)
            .or_default()
            .entry(s.state.to_string())
            .or_default() += 1;
        let (launch, validate) = (
            s.launch_seconds.unwrap_or(0.0),
            s.validate_seconds.unwrap_or(0.0),
        );
        if let Some(builder) = s.built_by {
            *builders.entry(builder.to_string()).or_default() += 1;
        }
        if launch + validate > 0.0 {
            instances.push(json!({
                "id": s.instance_id, "launch": round(launch), "validate": round(validate),
                "built_by": s.built_by, "agent_steps": s.agent_steps,
                "agent_tokens": s.agent_tokens, "agent_cost_usd": s.agent_cost_usd,
            }));
        }
    }
    instances.sort_by(|a, b| {
        let total =
            |v: &Value| v["launch"].as_f64().unwrap_or(0.0) + v["validate"].as_f64().unwrap_or(0.0);
        total(b).total_cmp(&total(a))
    });
    instances.truncate(MAX_INSTANCES);
    let mut failures: Vec<(String, String, u64)> = funnel
        .failures
        .iter()
        .flat_map(|(state, classes)| {
            classes
                .iter()
                .map(move |(class, n)| (state.clone(), class.clone(), *n))
        })
        .collect();
    failures.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    // Every instance, the ones that did not validate first, with where its logs are.
    let mut table: Vec<&crate::summary::InstanceSummary> = summaries.iter().collect();
    table.sort_by_key(|s| (s.state == InstanceState::Validated, s.instance_id.clone()));
    let table: Vec<Value> = table
        .into_iter()
        .map(|s| {
            json!({
                "id": s.instance_id,
                "state": s.state.as_str(),
                "class": s.stop_class(),
                "reason": s.reason.as_deref().map(|r| cut(r, 240)),
                "launch": s.launch_seconds.map(round),
                "validate": s.validate_seconds.map(round),
                "built_by": s.built_by,
                "fail_to_pass": s.fail_to_pass.len(),
                // Only launch and validate write logs.
                "logs": (s.launch_seconds.is_some() || s.validate_seconds.is_some())
                    .then(|| format!("logs/{}/", s.instance_id.file_stem())),
            })
        })
        .collect();
    let mut stages = Vec::new();
    let mut tokens = Vec::new();
    for (stage, manifest) in crate::status::stage_manifests(pipeline, run) {
        let Some(manifest) = manifest else { continue };
        if let Some(wall) = manifest.stats.get(WALL_SECONDS) {
            stages.push(json!([stage, round(*wall)]));
        }
        let prompt = manifest
            .stats
            .get("lm.prompt_tokens")
            .copied()
            .unwrap_or(0.0);
        let completion = manifest
            .stats
            .get("lm.completion_tokens")
            .copied()
            .unwrap_or(0.0);
        if prompt + completion > 0.0 {
            tokens.push(json!({"stage": stage, "prompt": prompt, "completion": completion}));
        }
    }
    let spent = crate::status::lm_spent(run.dir())?;
    let info = run.info();
    Ok(json!({
        "dataset": pipeline.dataset.name,
        "run_id": info.run_id,
        "status": format!("{:?}", info.status).to_lowercase(),
        "started_at": info.started_at,
        "config_hash": info.config_hash,
        "funnel": [
            ["pull requests", funnel.pull_requests],
            ["candidates", funnel.candidates],
            ["kept by the filter", funnel.kept],
            ["for Linux", funnel.platform],
            ["environment built", funnel.built],
            ["validated", funnel.validated],
            ["released", released],
        ],
        "languages": languages.into_iter().map(|(language, states)| json!({
            "language": language,
            "states": states.into_iter().map(|(s, n)| json!([s, n])).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "failures": failures.into_iter().map(|(state, class, n)| json!([state, class, n])).collect::<Vec<_>>(),
        "table": table,
        "instances": instances,
        "builders": builders.into_iter().map(|(b, n)| json!([b, n])).collect::<Vec<_>>(),
        "stages": stages,
        "tokens": tokens,
        "lm_requests": spent.as_ref().map_or(0, |s| s.requests),
        "cost_usd": spent.as_ref().map_or(0.0, |s| s.cost_usd),
    }))
}

fn round(seconds: f64) -> f64 {
    (seconds * 10.0).round() / 10.0
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// Where the page links the run's files from: nothing when the page sits in the run
/// directory (the default), else the run directory as a `file://` address.
fn files_base(run_dir: &Path, page: &Path) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let run_dir = absolute(run_dir);
    if page.parent().map(absolute).as_deref() == Some(run_dir.as_path()) {
        return String::new();
    }
    format!("file://{}/", run_dir.display())
}

/// The report page of a run, to be written at `page` (its links to the run's logs are
/// relative when it sits in the run directory).
///
/// # Errors
/// When a stage table cannot be read.
pub fn render(pipeline: &Pipeline, run: &RunStore, page: &Path) -> Result<String, PipelineError> {
    let mut data = report_data(pipeline, run)?;
    data["files_base"] = json!(files_base(run.dir(), page));
    // Inside <script>, "</" would end the element early.
    let json = data.to_string().replace("</", "<\\/");
    let title = format!("kiln run {} of {}", run.run_id(), pipeline.dataset.name);
    Ok(TEMPLATE
        .replace("{{TITLE}}", &escape_html(&title))
        .replace("{{DATA}}", &json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_no_external_asset_and_escapes_its_data() {
        for needle in ["src=\"http", "href=\"http", "@import", "url(http"] {
            assert!(!TEMPLATE.contains(needle), "{needle}");
        }
        assert_eq!(escape_html("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        let data = json!({"x": "</script><script>alert(1)</script>"});
        let text = data.to_string().replace("</", "<\\/");
        assert!(!text.contains("</script"));
    }

    #[test]
    fn links_are_relative_in_the_run_directory_and_absolute_elsewhere() {
        let run = Path::new("/data/ds/runs/r1");
        assert_eq!(files_base(run, &run.join("report.html")), "");
        assert_eq!(
            files_base(run, Path::new("/tmp/report.html")),
            "file:///data/ds/runs/r1/"
        );
        assert_eq!(cut("abcdef", 3), "abc…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
