//! `crawl`: candidates from GitHub, a date window of merged pull requests at a time.
//!
//! The crawl itself is `kiln-github`'s; this stage gives it what the run store knows and keeps
//! what it finds:
//! - the window's end, fixed at the first start (`until` left open means "now" once, not a new
//!   "now" at every resume);
//! - the rows already written (skipped) and each repository's progress, stored in the stage
//!   manifest's state together with the rows of the page it belongs to, so a crash between pages
//!   loses nothing and repeats nothing;
//! - what earlier runs of the dataset crawled: their pull requests are skipped, and windows they
//!   finished (once final) are not searched again;
//! - request counts by kind, calls per candidate and GraphQL points, in the manifest's stats.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kiln_core::Event;
use kiln_core::config::{CrawlSettings, format_time};
use kiln_github::crawl::{
    ClientOptions, CrawlError, CrawlRequest, GitHub, Output, Prior, RepoProgress, SETTLE, Token,
};
use kiln_schema::{Candidate, CandidateStatus, Row as _};
use kiln_store::StageTable;
use serde_json::Value;

use super::context::{StageContext, StageOutcome, started};
use crate::error::PipelineError;
use crate::shards;

/// State keys in the stage manifest.
const WINDOW: &str = "window";
const REPOSITORIES: &str = "repositories";
const LIMIT_REACHED: &str = "limit_reached";
const REPO_PREFIX: &str = "repo:";

pub(crate) async fn crawl(
    cx: &StageContext<'_>,
    settings: &CrawlSettings,
) -> Result<StageOutcome, PipelineError> {
    if cx.options.only.is_some() {
        return Err(PipelineError::Input {
            what: format!("the options of stage {}", cx.node.name),
            message:
                "a crawl cannot be limited to instance ids (--only); re-run it whole with --force"
                    .into(),
        });
    }
    let mut table = cx.table::<Candidate>()?;
    if cx.options.force {
        table.reset()?;
    }
    if table.is_complete() {
        let rows = table.rows()?;
        started(cx, rows.len(), rows.len() as u64);
        return Ok(outcome(cx, &table, &rows, 0, true));
    }
    let (since, until) = window(&mut table, settings)?;
    let tokens = tokens(settings, &cx.options.secrets)?;
    let progress = stored_progress(&table);
    let repositories = table
        .state()
        .get(REPOSITORIES)
        .and_then(|v| serde_json::from_value::<Vec<String>>(v.clone()).ok());
    let own_rows = table.rows()?;
    let kept_so_far = own_rows
        .iter()
        .filter(|r| r.status == CandidateStatus::Ok)
        .count();
    let mut prior = earlier_crawls(cx)?;
    prior
        .seen
        .extend(own_rows.iter().map(|r| r.instance_id.to_string()));
    started(cx, 0, own_rows.len() as u64);

    let root = &cx.pipeline.dataset.root;
    let mirrors = kiln_git::MirrorCache::new(&root.join(".cache").join("git")).map_err(|e| {
        PipelineError::Input {
            what: "the repository mirror cache".into(),
            message: e.to_string(),
        }
    })?;
    let mut options = ClientOptions::new(&settings.api_url);
    options.requests_in_flight = usize::try_from(settings.requests_in_flight).unwrap_or(2);
    options.etag_dir = Some(root.join(".cache").join("github"));
    let reporter = Arc::clone(&cx.reporter);
    let stage = cx.node.name.clone();
    let client = Arc::new(
        GitHub::new(
            options,
            tokens,
            Arc::new(move |message| {
                reporter.report(Event::Note {
                    message: format!("{stage}: {message}"),
                });
            }),
        )
        .map_err(github_error)?,
    );
    // A split run crawls this shard's repositories: listed ones as the shared plan deals them,
    // discovered ones by the hash of their names.
    let mut settings = settings.clone();
    let mut shard = None;
    if let Some(this) = &cx.pipeline.shard {
        if settings.discover.is_some() {
            shard = Some(this.id);
        } else {
            let listed: BTreeMap<String, u64> =
                settings.repos.iter().map(|r| (r.clone(), 1)).collect();
            let plan = shards::plan(cx.pipeline, this, &listed)?;
            shards::record_plan(&cx.node.name, &mut table, &plan)?;
            settings
                .repos
                .retain(|r| plan.shard_of(r) == Some(this.id.index));
        }
    }
    let request = CrawlRequest {
        settings,
        shard,
        since,
        until,
        mirrors,
        prior,
        repositories,
        progress,
        kept_so_far: i64::try_from(kept_so_far).unwrap_or(i64::MAX),
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Output>(8);
    let work = kiln_github::crawl::crawl(request, Arc::clone(&client), tx);
    let mut written = 0u64;
    let mut repositories_known: Option<Vec<String>> = None;
    let mut progress_seen: BTreeMap<String, RepoProgress> = stored_progress(&table);
    let keep = async {
        while let Some(output) = rx.recv().await {
            match output {
                Output::Repositories(repos) => {
                    repositories_known = Some(repos.clone());
                    table.append_with_state(
                        &[],
                        BTreeMap::from([(REPOSITORIES.to_string(), serde_json::json!(repos))]),
                    )?;
                }
                Output::Page {
                    repo,
                    rows,
                    progress,
                } => {
                    let rows: Vec<Candidate> = rows
                        .into_iter()
                        .filter(|r| !table.contains(r.key()).unwrap_or(false))
                        .collect();
                    let state = BTreeMap::from([(
                        format!("{REPO_PREFIX}{repo}"),
                        serde_json::to_value(&progress).unwrap_or(Value::Null),
                    )]);
                    table.append_with_state(&rows, state)?;
                    for row in &rows {
                        cx.reporter.report(Event::ItemFinished {
                            stage: cx.node.name.clone(),
                            item: row.instance_id.to_string(),
                            outcome: row_outcome(row),
                            seconds: 0.0,
                        });
                    }
                    written += rows.len() as u64;
                    progress_seen.insert(repo, progress);
                }
                Output::Note(message) => cx.reporter.report(Event::Note {
                    message: format!("{}: {message}", cx.node.name),
                }),
            }
        }
        Ok::<(), PipelineError>(())
    };
    // When keeping fails (the disk), the crawl is dropped with it, which stops its tasks.
    let (summary, ()) = tokio::try_join!(async { work.await.map_err(github_error) }, keep)?;
    if summary.limit_reached {
        table.append_with_state(
            &[],
            BTreeMap::from([(LIMIT_REACHED.to_string(), Value::Bool(true))]),
        )?;
    }
    let repos = repositories_known
        .or_else(|| {
            table
                .state()
                .get(REPOSITORIES)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
        })
        .unwrap_or_default();
    let all_done = repos.iter().all(|r| {
        progress_seen
            .get(r)
            .is_some_and(|p| p.done && p.error.is_none())
    });
    let complete = all_done || summary.limit_reached;
    let rows = table.rows()?;
    // A resumed crawl adds its requests to those of the earlier starts.
    let mut counters = client.counters();
    for (key, value) in &table.manifest().stats {
        if key.starts_with("graphql.")
            || key.starts_with("rest.")
            || key.starts_with("http.")
            || key == "retries"
            || key.ends_with(".waits")
        {
            let earlier = *value as u64;
            *counters.entry(key.clone()).or_default() += earlier;
        }
    }
    let earlier_written = table
        .manifest()
        .stats
        .get("rows_written")
        .copied()
        .unwrap_or(0.0);
    let total_written = written + earlier_written as u64;
    let earlier_wall = table
        .manifest()
        .stats
        .get(super::context::WALL_SECONDS)
        .copied()
        .unwrap_or(0.0);
    let mut figures = stats(&counters, total_written, &rows);
    figures.insert(
        super::context::WALL_SECONDS.to_string(),
        earlier_wall + cx.started.elapsed().as_secs_f64(),
    );
    table.set_stats(figures)?;
    let outcome = outcome(cx, &table, &rows, written, complete);
    table.set_complete(complete, outcome.counts.clone())?;
    if complete {
        table.compact()?;
    }
    let mut outcome = outcome;
    outcome.stats = table.manifest().stats.clone();
    Ok(outcome)
}

fn github_error(e: CrawlError) -> PipelineError {
    PipelineError::Input {
        what: "GitHub".into(),
        message: e.to_string(),
    }
}

fn row_outcome(row: &Candidate) -> String {
    match (&row.drop_reason, row.status.as_str()) {
        (Some(reason), _) => format!("dropped:{reason}"),
        (None, status) => status.to_string(),
    }
}

fn outcome(
    cx: &StageContext<'_>,
    table: &StageTable<Candidate>,
    rows: &[Candidate],
    processed: u64,
    complete: bool,
) -> StageOutcome {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for row in rows {
        *counts.entry(row_outcome(row)).or_default() += 1;
    }
    StageOutcome {
        stage: cx.node.name.clone(),
        rows: rows.len() as u64,
        processed,
        skipped: rows.len() as u64 - processed.min(rows.len() as u64),
        complete,
        counts,
        release_dir: None,
        stats: table.manifest().stats.clone(),
    }
}

/// The window, fixed in the stage state the first time: an open end becomes this moment.
fn window(
    table: &mut StageTable<Candidate>,
    settings: &CrawlSettings,
) -> Result<(DateTime<Utc>, DateTime<Utc>), PipelineError> {
    let parse = |text: &str| {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| PipelineError::Internal(format!("a stored crawl window: {e}")))
    };
    if let Some(stored) = table.state().get(WINDOW) {
        let since = stored
            .get("since")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let until = stored
            .get("until")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Ok((parse(since)?, parse(until)?));
    }
    let since = parse(&settings.since)?;
    let until = match &settings.until {
        Some(until) => parse(until)?,
        None => Utc::now(),
    };
    table.append_with_state(
        &[],
        BTreeMap::from([(
            WINDOW.to_string(),
            serde_json::json!({"since": format_time(&since), "until": format_time(&until)}),
        )]),
    )?;
    Ok((since, until))
}

/// The tokens of the variables named in `token_env` that are set.
fn tokens(
    settings: &CrawlSettings,
    secrets: &crate::options::Secrets,
) -> Result<Vec<Token>, PipelineError> {
    let tokens: Vec<Token> = settings
        .token_env
        .iter()
        .filter_map(|name| {
            secrets
                .get(name)
                .map(|value| Token::new(name, value.trim()))
        })
        .collect();
    if tokens.is_empty() {
        return Err(PipelineError::Input {
            what: "a GitHub token".into(),
            message: format!(
                "none of the environment variables in token_env is set ({})",
                settings.token_env.join(", ")
            ),
        });
    }
    Ok(tokens)
}

fn stored_progress(table: &StageTable<Candidate>) -> BTreeMap<String, RepoProgress> {
    table
        .state()
        .iter()
        .filter_map(|(key, value)| {
            let repo = key.strip_prefix(REPO_PREFIX)?;
            let progress: RepoProgress = serde_json::from_value(value.clone()).ok()?;
            Some((repo.to_string(), progress))
        })
        .collect()
}

/// What the other runs of this dataset crawled with a stage of this name: their pull requests,
/// and the windows they finished long enough after the window's end for the results to be final.
fn earlier_crawls(cx: &StageContext<'_>) -> Result<Prior, PipelineError> {
    let mut prior = Prior::default();
    // A shard also skips what the dataset's merged runs crawled, under the shared root.
    for run in cx.other_runs()? {
        let dir = run.dir().join(&cx.node.name);
        let Ok(manifest) = kiln_store::Manifest::read(&dir) else {
            continue;
        };
        if manifest.table != Candidate::TABLE {
            continue;
        }
        for key in kiln_store::read_keys(&dir)? {
            prior.seen.insert(key);
        }
        let window = manifest.state.get(WINDOW);
        let parse = |field: &str| {
            window
                .and_then(|w| w.get(field))
                .and_then(Value::as_str)
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc))
        };
        let (Some(since), Some(until)) = (parse("since"), parse("until")) else {
            continue;
        };
        for (key, value) in &manifest.state {
            let Some(repo) = key.strip_prefix(REPO_PREFIX) else {
                continue;
            };
            let Ok(progress) = serde_json::from_value::<RepoProgress>(value.clone()) else {
                continue;
            };
            if !progress.done || progress.error.is_some() {
                continue;
            }
            let Some(finished) = progress
                .finished_at
                .as_deref()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc))
            else {
                continue;
            };
            let end = until.min(finished - SETTLE);
            if end > since {
                prior
                    .covered
                    .entry(repo.to_ascii_lowercase())
                    .or_default()
                    .push((since, end));
            }
        }
    }
    Ok(prior)
}

/// The stage's figures: requests by kind, calls per candidate, points.
fn stats(
    counters: &BTreeMap<String, u64>,
    written: u64,
    rows: &[Candidate],
) -> BTreeMap<String, f64> {
    let mut stats: BTreeMap<String, f64> = BTreeMap::new();
    let mut requests = 0u64;
    for (key, value) in counters {
        stats.insert(key.clone(), *value as f64);
        if key.starts_with("graphql.") && key != "graphql.points" || key.starts_with("rest.") {
            requests += value;
        }
    }
    let kept = rows
        .iter()
        .filter(|r| r.status == CandidateStatus::Ok)
        .count();
    let seen: BTreeSet<&str> = rows.iter().map(|r| r.instance_id.as_str()).collect();
    {
        stats.insert("requests".into(), requests as f64);
        stats.insert("rows_written".into(), written as f64);
        stats.insert("candidates_kept".into(), kept as f64);
        stats.insert("pull_requests_seen".into(), seen.len() as f64);
        if written > 0 {
            stats.insert(
                "requests_per_candidate".into(),
                requests as f64 / written as f64,
            );
        }
    }
    stats
}
