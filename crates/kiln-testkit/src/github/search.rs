//! The search qualifiers the fake GitHub understands, read from a search's query text: the
//! repository, merged state and window, and the repository search's language, stars, forks,
//! archived and fork flags and push date. Anything else is an error, so a client cannot come to
//! rely on a qualifier the fake would silently ignore.

use chrono::{DateTime, Utc};

use super::model::parse_time;

/// A range of times, either end open.
pub(super) type TimeRange = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// The qualifiers of a search the fake understands; anything else is an error, so a client
/// cannot come to rely on a qualifier the fake would silently ignore.
#[derive(Debug, Default)]
pub(super) struct SearchTerms {
    /// `repo:owner/name`.
    pub(super) repo: Option<String>,
    /// `is:pr` or `type:pr`.
    pub(super) is_pr: bool,
    /// `is:merged`.
    pub(super) is_merged: bool,
    /// `merged:A..B`.
    pub(super) merged: Option<TimeRange>,
    /// `sort:created-asc` and the like.
    pub(super) sort: Option<String>,
    /// `language:X`.
    pub(super) language: Option<String>,
    /// `stars:A..B`, both ends inclusive.
    pub(super) stars: Option<(u64, u64)>,
    /// `forks:>=N`.
    pub(super) forks_at_least: Option<u64>,
    /// `archived:true|false`.
    pub(super) archived: Option<bool>,
    /// `fork:true|false`.
    pub(super) fork: Option<bool>,
    /// `pushed:>=T`.
    pub(super) pushed_since: Option<DateTime<Utc>>,
}

impl SearchTerms {
    /// Reads a search's query text; an unknown qualifier or free text is an error.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Self::default();
        for word in split_words(text) {
            let (key, value) = word
                .split_once(':')
                .ok_or_else(|| format!("the fake GitHub does not search text (`{word}`)"))?;
            let value = value.trim_matches('"');
            match key {
                "repo" => terms.repo = Some(value.to_string()),
                "is" if value == "pr" => terms.is_pr = true,
                "is" if value == "merged" => terms.is_merged = true,
                "type" if value == "pr" => terms.is_pr = true,
                "merged" => terms.merged = Some(range(value, parse_time)?),
                "sort" => terms.sort = Some(value.to_string()),
                "language" => terms.language = Some(value.to_string()),
                "stars" => {
                    let (lo, hi) = range(value, |v| v.parse::<u64>().ok())?;
                    terms.stars = Some((lo.unwrap_or(0), hi.unwrap_or(u64::MAX)));
                }
                "forks" => terms.forks_at_least = range(value, |v| v.parse::<u64>().ok())?.0,
                "archived" => terms.archived = Some(value == "true"),
                "fork" => terms.fork = Some(value == "true"),
                "pushed" => terms.pushed_since = range(value, parse_time)?.0,
                _ => {
                    return Err(format!(
                        "the fake GitHub does not know the qualifier `{key}:`"
                    ));
                }
            }
        }
        Ok(terms)
    }
}

/// The words of a query, a quoted value kept whole.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// `A..B`, `>=A`, `>A`, `<=B`, `<B` or `A` (both ends inclusive, as GitHub reads them; `>`
/// and `<` are treated as inclusive too, which is all the fake needs).
fn range<T: Copy>(
    value: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<(Option<T>, Option<T>), String> {
    let bad = || format!("cannot read the range `{value}`");
    if let Some((a, b)) = value.split_once("..") {
        let a = if a == "*" {
            None
        } else {
            Some(parse(a).ok_or_else(bad)?)
        };
        let b = if b == "*" {
            None
        } else {
            Some(parse(b).ok_or_else(bad)?)
        };
        return Ok((a, b));
    }
    if let Some(rest) = value.strip_prefix(">=").or_else(|| value.strip_prefix('>')) {
        return Ok((Some(parse(rest).ok_or_else(bad)?), None));
    }
    if let Some(rest) = value.strip_prefix("<=").or_else(|| value.strip_prefix('<')) {
        return Ok((None, Some(parse(rest).ok_or_else(bad)?)));
    }
    let v = parse(value).ok_or_else(bad)?;
    Ok((Some(v), Some(v)))
}
