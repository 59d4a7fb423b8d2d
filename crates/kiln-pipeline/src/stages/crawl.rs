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
use kiln_core::config::{CrawlSettings, ShardId, format_time};
use kiln_github::crawl::{
    ClientOptions, CrawlError, CrawlRequest, CrawlSummary, GitHub, Output, Prior, RepoProgress,
    SETTLE, Token,
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

/// Crawls the stage's window (or, complete, only reports it): the request made of what the
/// stage's earlier starts and the dataset's other runs know, the rows and progress kept page by
/// page as they come, then the figures and whether the crawl is complete.
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
    let known = Known::read(cx, &table)?;
    started(cx, 0, known.own_rows);
    let mirrors = mirror_cache(cx)?;
    let client = github_client(cx, settings, tokens)?;
    let (settings, shard) = shard_settings(cx, settings, &mut table)?;
    let request = CrawlRequest {
        settings,
        shard,
        since,
        until,
        mirrors,
        prior: known.prior,
        repositories: known.repositories,
        progress: known.progress,
        kept_so_far: i64::try_from(known.kept_so_far).unwrap_or(i64::MAX),
    };
    let (summary, kept) = run_crawl(cx, &mut table, request, &client).await?;
    let complete = is_complete(&mut table, &summary, &kept)?;
    let rows = table.rows()?;
    record_figures(cx, &mut table, &client, kept.written, &rows)?;
    let outcome = outcome(cx, &table, &rows, kept.written, complete);
    table.set_complete(complete, outcome.counts.clone())?;
    if complete {
        table.compact()?;
    }
    let mut outcome = outcome;
    outcome.stats = table.manifest().stats.clone();
    Ok(outcome)
}

/// What a crawl that starts again knows before it asks GitHub anything.
struct Known {
    /// Each repository's progress, as the stage's earlier starts stored it.
    progress: BTreeMap<String, RepoProgress>,
    /// The repositories to crawl, once an earlier start listed them.
    repositories: Option<Vec<String>>,
    /// Rows the stage already has (skipped).
    own_rows: u64,
    /// Candidates of those rows kept, which count against `max_candidates`.
    kept_so_far: usize,
    /// What earlier runs crawled, and the pull requests of the stage's own rows: not again.
    prior: Prior,
}

impl Known {
    /// Reads what the stage's table and the dataset's other runs hold.
    fn read(cx: &StageContext<'_>, table: &StageTable<Candidate>) -> Result<Self, PipelineError> {
        let progress = stored_progress(table);
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
        Ok(Self {
            progress,
            repositories,
            own_rows: own_rows.len() as u64,
            kept_so_far,
            prior,
        })
    }
}

/// The dataset root's cache of repository mirrors, which the crawl reads commits from.
fn mirror_cache(cx: &StageContext<'_>) -> Result<kiln_git::MirrorCache, PipelineError> {
    let root = &cx.pipeline.dataset.root;
    kiln_git::MirrorCache::new(&root.join(".cache").join("git")).map_err(|e| PipelineError::Input {
        what: "the repository mirror cache".into(),
        message: e.to_string(),
    })
}

/// The GitHub client of the crawl: its tokens, the requests it keeps in flight, the ETags it
/// keeps under the dataset root, and its notes reported under the stage's name.
fn github_client(
    cx: &StageContext<'_>,
    settings: &CrawlSettings,
    tokens: Vec<Token>,
) -> Result<Arc<GitHub>, PipelineError> {
    let root = &cx.pipeline.dataset.root;
    let mut options = ClientOptions::new(&settings.api_url);
    options.requests_in_flight = usize::try_from(settings.requests_in_flight).unwrap_or(2);
    options.etag_dir = Some(root.join(".cache").join("github"));
    let reporter = Arc::clone(&cx.reporter);
    let stage = cx.node.name.clone();
    let client = GitHub::new(
        options,
        tokens,
        Arc::new(move |message| {
            reporter.report(Event::Note {
                message: format!("{stage}: {message}"),
            });
        }),
    )
    .map_err(github_error)?;
    Ok(Arc::new(client))
}

/// The settings this crawl runs with, and the shard whose discovered repositories it keeps.
///
/// A split run crawls this shard's repositories: listed ones as the shared plan deals them
/// (the plan recorded in the stage's state), discovered ones by the hash of their names.
fn shard_settings(
    cx: &StageContext<'_>,
    settings: &CrawlSettings,
    table: &mut StageTable<Candidate>,
) -> Result<(CrawlSettings, Option<ShardId>), PipelineError> {
    let mut settings = settings.clone();
    let mut shard = None;
    if let Some(this) = &cx.pipeline.shard {
        if settings.discover.is_some() {
            shard = Some(this.id);
        } else {
            let listed: BTreeMap<String, u64> =
                settings.repos.iter().map(|r| (r.clone(), 1)).collect();
            let plan = shards::plan(cx.pipeline, this, &listed)?;
            shards::record_plan(&cx.node.name, table, &plan)?;
            settings
                .repos
                .retain(|r| plan.shard_of(r) == Some(this.id.index));
        }
    }
    Ok((settings, shard))
}

/// What one start of the crawl kept of what the crawl sent.
struct Kept {
    /// Rows written by this start.
    written: u64,
    /// The repositories to crawl, when this start listed them.
    repositories: Option<Vec<String>>,
    /// Each repository's progress: stored by earlier starts, then as this one left it.
    progress: BTreeMap<String, RepoProgress>,
}

/// Runs the crawl and keeps what it sends as it comes: the repository list, and each page's
/// new rows together with its repository's progress, so a crash between pages loses nothing
/// and repeats nothing.
async fn run_crawl(
    cx: &StageContext<'_>,
    table: &mut StageTable<Candidate>,
    request: CrawlRequest,
    client: &Arc<GitHub>,
) -> Result<(CrawlSummary, Kept), PipelineError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Output>(8);
    let work = kiln_github::crawl::crawl(request, Arc::clone(client), tx);
    let mut kept = Kept {
        written: 0,
        repositories: None,
        progress: stored_progress(table),
    };
    let keep = async {
        while let Some(output) = rx.recv().await {
            keep_output(cx, table, output, &mut kept)?;
        }
        Ok::<(), PipelineError>(())
    };
    // When keeping fails (the disk), the crawl is dropped with it, which stops its tasks.
    let (summary, ()) = tokio::try_join!(async { work.await.map_err(github_error) }, keep)?;
    Ok((summary, kept))
}

/// Keeps one thing the crawl sent: the repository list in the stage's state; a page's rows the
/// table does not hold yet, appended with the repository's progress and reported one by one;
/// a note reported under the stage's name.
fn keep_output(
    cx: &StageContext<'_>,
    table: &mut StageTable<Candidate>,
    output: Output,
    kept: &mut Kept,
) -> Result<(), PipelineError> {
    match output {
        Output::Repositories(repos) => {
            kept.repositories = Some(repos.clone());
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
            kept.written += rows.len() as u64;
            kept.progress.insert(repo, progress);
        }
        Output::Note(message) => cx.reporter.report(Event::Note {
            message: format!("{}: {message}", cx.node.name),
        }),
    }
    Ok(())
}

/// Whether the crawl is complete: every repository's window done without an error, or
/// `max_candidates` reached (which the stage's state then records).
fn is_complete(
    table: &mut StageTable<Candidate>,
    summary: &CrawlSummary,
    kept: &Kept,
) -> Result<bool, PipelineError> {
    if summary.limit_reached {
        table.append_with_state(
            &[],
            BTreeMap::from([(LIMIT_REACHED.to_string(), Value::Bool(true))]),
        )?;
    }
    let repos: Vec<String> = kept
        .repositories
        .clone()
        .or_else(|| {
            table
                .state()
                .get(REPOSITORIES)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
        })
        .unwrap_or_default();
    let all_done = repos.iter().all(|r| {
        kept.progress
            .get(r)
            .is_some_and(|p| p.done && p.error.is_none())
    });
    Ok(all_done || summary.limit_reached)
}

/// Sets the stage's figures ([`stats`]): a resumed crawl adds its requests, the rows it wrote
/// and its wall time to those of the earlier starts.
fn record_figures(
    cx: &StageContext<'_>,
    table: &mut StageTable<Candidate>,
    client: &GitHub,
    written: u64,
    rows: &[Candidate],
) -> Result<(), PipelineError> {
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
    let mut figures = stats(&counters, total_written, rows);
    figures.insert(
        super::context::WALL_SECONDS.to_string(),
        earlier_wall + cx.started.elapsed().as_secs_f64(),
    );
    table.set_stats(figures)?;
    Ok(())
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
