//! Sources: the nodes that produce candidates.

use std::path::PathBuf;

use chrono::{DateTime, Datelike as _, NaiveDate, TimeZone as _, Utc};
use serde::Serialize;

use super::read::{Compiler, Keys, Need, Value, cut};

/// Settings of an `ingest` source.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IngestSettings {
    /// The task file (JSON array or JSONL), resolved against the config file's directory.
    pub path: PathBuf,
    /// Clone URL template with `{repo}`, `{owner}`, `{name}`.
    pub clone_url: String,
    /// Only these instance ids, when not empty.
    pub instances: Vec<String>,
}

/// Settings of a `crawl` source: merged pull requests that resolve an issue, from GitHub.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CrawlSettings {
    /// REST API root (`https://api.github.com`, or a GitHub Enterprise `https://host/api/v3`).
    pub api_url: String,
    /// Repositories to crawl (`owner/name`), besides those `discover` finds.
    pub repos: Vec<String>,
    /// Repository discovery by search, when set.
    pub discover: Option<DiscoverSettings>,
    /// Start of the merge window (RFC 3339, UTC), inclusive.
    pub since: String,
    /// End of the merge window (RFC 3339, UTC), exclusive; `None` means the moment the crawl
    /// first starts (kept in the run, so a resumed crawl keeps the same window).
    pub until: Option<String>,
    /// Names of the environment variables that hold tokens (rotated; the values are never
    /// stored).
    pub token_env: Vec<String>,
    /// Stop after this many kept candidates (for trials).
    pub max_candidates: Option<i64>,
    /// Clone URL template of the repositories (their diffs are computed from a local mirror).
    pub clone_url: String,
    /// Pull requests changing more files are dropped as too large.
    pub max_files: i64,
    /// Pull requests changing more lines (added plus deleted) are dropped as too large.
    pub max_changed_lines: i64,
    /// Repositories crawled at once.
    pub concurrency: i64,
    /// Requests to GitHub in flight at once (secondary rate limits punish more).
    pub requests_in_flight: i64,
}

/// Settings of a crawl's repository discovery (a repository search, star ranges split until
/// each search stays under GitHub's 1,000-result cap).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiscoverSettings {
    /// Main language, as GitHub names it (`Python`, `Rust`, `TypeScript`).
    pub language: String,
    /// Fewest stars.
    pub min_stars: i64,
    /// Most stars.
    pub max_stars: i64,
    /// Fewest forks.
    pub min_forks: i64,
    /// Smallest share (0 to 1) of the repository's code in `language`.
    pub min_language_share: f64,
    /// Only repositories pushed to on or after this date (RFC 3339), when set.
    pub pushed_after: Option<String>,
    /// At most this many repositories, most starred first.
    pub max_repos: i64,
}

/// Keys of an `ingest` source.
pub(super) const INGEST_KEYS: &[&str] = &["kind", "path", "clone_url", "instances"];

/// Keys of a `crawl` source.
pub(super) const CRAWL_KEYS: &[&str] = &[
    "kind",
    "api_url",
    "repos",
    "discover",
    "since",
    "until",
    "month",
    "token_env",
    "max_candidates",
    "clone_url",
    "max_files",
    "max_changed_lines",
    "concurrency",
    "requests_in_flight",
];

/// Keys of a crawl's `discover` table.
const DISCOVER_KEYS: &[&str] = &[
    "language",
    "min_stars",
    "max_stars",
    "min_forks",
    "min_language_share",
    "pushed_after",
    "max_repos",
];

/// Parses `YYYY-MM-DD` (midnight UTC) or an RFC 3339 time.
fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(time) = DateTime::parse_from_rfc3339(text.trim()) {
        return Ok(time.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| Utc.from_utc_datetime(&t))
        .ok_or_else(|| {
            format!(
                "\"{}\" is not a date; use YYYY-MM-DD or RFC 3339 such as 2024-09-01T00:00:00Z",
                cut(text)
            )
        })
}

impl CrawlSettings {
    /// `YYYY-MM` when the merge window is exactly one calendar month (as `month` gives).
    #[must_use]
    pub fn month(&self) -> Option<String> {
        let month = self.since.get(..7)?;
        let (start, end) = month_window(month).ok()?;
        let until = self.until.as_deref()?;
        (self.since == format_time(&start) && until == format_time(&end)).then(|| month.to_string())
    }

    /// Sets the merge window to the calendar month `month` (`YYYY-MM`).
    ///
    /// # Errors
    /// When `month` is not a month.
    pub fn set_month(&mut self, month: &str) -> Result<(), String> {
        let (start, end) = month_window(month)?;
        self.since = format_time(&start);
        self.until = Some(format_time(&end));
        Ok(())
    }
}

/// The window of a `YYYY-MM` month: its first instant and the first instant of the next month.
pub(super) fn month_window(text: &str) -> Result<(DateTime<Utc>, DateTime<Utc>), String> {
    let bad = || {
        format!(
            "\"{}\" is not a month; use YYYY-MM such as 2024-09",
            cut(text)
        )
    };
    let first =
        NaiveDate::parse_from_str(&format!("{}-01", text.trim()), "%Y-%m-%d").map_err(|_| bad())?;
    if text.trim().len() != 7 {
        return Err(bad());
    }
    let next = if first.month() == 12 {
        NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
    }
    .ok_or_else(bad)?;
    let at = |d: NaiveDate| d.and_hms_opt(0, 0, 0).map(|t| Utc.from_utc_datetime(&t));
    Ok((at(first).ok_or_else(bad)?, at(next).ok_or_else(bad)?))
}

/// RFC 3339 in UTC with second precision, the form every window bound is stored in.
#[must_use]
pub fn format_time(time: &DateTime<Utc>) -> String {
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Whether `name` is a GitHub `owner/name`.
fn is_repo_name(name: &str) -> bool {
    let ok = |part: &str| {
        !part.is_empty()
            && part.len() <= 100
            && part != "."
            && part != ".."
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    matches!(name.split_once('/'), Some((owner, repo)) if ok(owner) && ok(repo))
}

impl Compiler<'_> {
    fn time_key(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
    ) -> Result<Option<DateTime<Utc>>, ()> {
        let at = keys.get(key).map_or(keys.at, |v| v.span().start);
        let path = keys.path(key);
        match self.string(keys, key) {
            None => Ok(None),
            Some(None) => Err(()),
            Some(Some(text)) => match parse_time(&text) {
                Ok(time) => Ok(Some(time)),
                Err(message) => {
                    self.error_at(at, &path, message);
                    Err(())
                }
            },
        }
    }

    fn clone_url_key(&mut self, keys: &mut Keys<'_, '_>) -> Result<String, ()> {
        let clone_url = self.string_or(keys, "clone_url", "https://github.com/{repo}.git");
        if let Ok(url) = &clone_url
            && !url.contains("{repo}")
            && !(url.contains("{owner}") && url.contains("{name}"))
        {
            let at = keys.get("clone_url").map_or(keys.at, |v| v.span().start);
            let path = keys.path("clone_url");
            self.error_at(
                at,
                &path,
                "must contain {repo}, or {owner} and {name}".into(),
            );
            return Err(());
        }
        Ok(self.expand_base(&clone_url?))
    }

    /// Compiles a `crawl` source's keys ([`CRAWL_KEYS`]).
    pub(super) fn crawl(&mut self, keys: &mut Keys<'_, '_>) -> Result<CrawlSettings, ()> {
        let api_url = self.string_or(keys, "api_url", "https://api.github.com");
        if let Ok(url) = &api_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            let at = keys.get("api_url").map_or(keys.at, |v| v.span().start);
            let path = keys.path("api_url");
            self.error_at(at, &path, "must be an http:// or https:// URL".into());
        }
        let repos_at = keys.get("repos").map_or(keys.at, |v| v.span().start);
        let repos = self.strings(keys, "repos");
        if let Ok(repos) = &repos {
            for repo in repos.iter().filter(|r| !is_repo_name(r)) {
                let path = keys.path("repos");
                self.error_at(
                    repos_at,
                    &path,
                    format!("\"{}\" is not an owner/name repository", cut(repo)),
                );
            }
        }
        let discover = match keys.get("discover") {
            None => Ok(None),
            Some(value) => self.discover(value, &keys.path("discover")).map(Some),
        };
        if matches!((&repos, &discover), (Ok(r), Ok(None)) if r.is_empty()) {
            let at = keys.at;
            let path = keys.path("repos");
            self.error_at(
                at,
                &path,
                "name the repositories to crawl in `repos`, or find them with a `discover` table"
                    .into(),
            );
        }
        let month_at = keys.get("month").map_or(keys.at, |v| v.span().start);
        let month = self.string(keys, "month");
        let since_at = keys.get("since").map_or(keys.at, |v| v.span().start);
        let since = self.time_key(keys, "since");
        let until = self.time_key(keys, "until");
        let window = match (month, since, until) {
            (Some(None), _, _) | (_, Err(()), _) | (_, _, Err(())) => Err(()),
            (Some(Some(month)), Ok(since), Ok(until)) => {
                let path = keys.path("month");
                if since.is_some() || until.is_some() {
                    self.error_at(
                        month_at,
                        &path,
                        "give either `month` or `since`/`until`, not both".into(),
                    );
                    Err(())
                } else {
                    match month_window(&month) {
                        Ok((start, end)) => Ok((start, Some(end))),
                        Err(message) => {
                            self.error_at(month_at, &path, message);
                            Err(())
                        }
                    }
                }
            }
            (None, Ok(None), Ok(_)) => {
                let path = keys.path("since");
                self.error_at(
                    keys.at,
                    &path,
                    "the merge window needs a start: `since` (or `month`)".into(),
                );
                Err(())
            }
            (None, Ok(Some(since)), Ok(until)) => Ok((since, until)),
        };
        if let Ok((since, Some(until))) = &window
            && until <= since
        {
            let path = keys.path("until");
            let at = keys.get("until").map_or(since_at, |v| v.span().start);
            self.error_at(
                at,
                &path,
                format!(
                    "the window ends ({}) before it starts ({})",
                    format_time(until),
                    format_time(since)
                ),
            );
        }
        let token_at = keys.get("token_env").map_or(keys.at, |v| v.span().start);
        let token_value = keys.get("token_env");
        let token_env = self.strings(keys, "token_env").map(|names| {
            if names.is_empty() && token_value.is_none() {
                vec!["GITHUB_TOKEN".to_string()]
            } else {
                names
            }
        });
        if let Ok(names) = &token_env {
            let path = keys.path("token_env");
            if names.is_empty() {
                self.error_at(
                    token_at,
                    &path,
                    "name at least one environment variable".into(),
                );
            }
            for name in names {
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    self.error_at(
                        token_at,
                        &path,
                        format!("\"{}\" is not an environment variable name", cut(name)),
                    );
                } else {
                    self.require(token_at, &path, Need::EnvVar(name.clone()));
                }
            }
        }
        let max_candidates = self.read_optional(keys, "max_candidates", 1..=10_000_000);
        let clone_url = self.clone_url_key(keys);
        // A GraphQL page lists at most 100 files of a pull request; a larger one cannot be
        // split without paging, and is far beyond a task's size anyway.
        let max_files = self.read(keys, "max_files", 50, 1..=100);
        let max_changed_lines = self.read(keys, "max_changed_lines", 2000, 1..=1_000_000);
        let concurrency = self.read(keys, "concurrency", 2, 1..=64);
        let requests_in_flight = self.read(keys, "requests_in_flight", 2, 1..=16);
        let (since, until) = window?;
        Ok(CrawlSettings {
            api_url: api_url?.trim_end_matches('/').to_string(),
            repos: repos?,
            discover: discover?,
            since: format_time(&since),
            until: until.as_ref().map(format_time),
            token_env: token_env?,
            max_candidates: max_candidates?,
            clone_url: clone_url?,
            max_files: max_files?,
            max_changed_lines: max_changed_lines?,
            concurrency: concurrency?,
            requests_in_flight: requests_in_flight?,
        })
    }

    fn discover(&mut self, value: &Value<'_>, key: &str) -> Result<DiscoverSettings, ()> {
        let table = self.table(value, key).ok_or(())?;
        let mut keys = Keys::new(table, key, value.span().start);
        let language = self.required_string(&mut keys, "language");
        let min_stars = self.read(&mut keys, "min_stars", 100, 0..=10_000_000);
        let max_stars = self.read(&mut keys, "max_stars", 1_000_000, 0..=10_000_000);
        if let (Ok(min), Ok(max)) = (&min_stars, &max_stars)
            && max < min
        {
            let at = keys.get("max_stars").map_or(keys.at, |v| v.span().start);
            let path = keys.path("max_stars");
            self.error_at(at, &path, format!("{max} is below min_stars {min}"));
        }
        let min_forks = self.read(&mut keys, "min_forks", 0, 0..=10_000_000);
        let share = self.read(&mut keys, "min_language_share", 0.6, 0.0..=1.0);
        let pushed_after = self.time_key(&mut keys, "pushed_after");
        let max_repos = self.read(&mut keys, "max_repos", 100, 1..=100_000);
        keys.finish(self, DISCOVER_KEYS);
        Ok(DiscoverSettings {
            language: language?,
            min_stars: min_stars?,
            max_stars: max_stars?,
            min_forks: min_forks?,
            min_language_share: share?,
            pushed_after: pushed_after?.as_ref().map(format_time),
            max_repos: max_repos?,
        })
    }

    /// Compiles an `ingest` source's keys ([`INGEST_KEYS`]).
    pub(super) fn ingest(&mut self, keys: &mut Keys<'_, '_>) -> Result<IngestSettings, ()> {
        let path_at = keys.get("path").map_or(keys.at, |v| v.span().start);
        let path = self.required_string(keys, "path");
        if let Ok(path) = &path {
            // `kiln check` says a missing task file now, not `kiln run` after making a run.
            let file = self.path_value(path);
            self.require(path_at, &keys.path("path"), Need::File(file));
        }
        let clone_url = self.clone_url_key(keys);
        let instances_at = keys.get("instances").map_or(keys.at, |v| v.span().start);
        let instances = self.strings(keys, "instances").and_then(|ids| {
            let mut ok = true;
            for id in &ids {
                if let Err(kiln_schema::IdError::Invalid { shown, reason }) =
                    kiln_schema::InstanceId::new(id)
                {
                    let path = keys.path("instances");
                    self.error_at(
                        instances_at,
                        &path,
                        format!("\"{shown}\" is not an instance id: it {reason}"),
                    );
                    ok = false;
                }
            }
            if ok { Ok(ids) } else { Err(()) }
        });
        Ok(IngestSettings {
            path: self.path_value(&path?),
            clone_url: clone_url?,
            instances: instances?,
        })
    }
}
