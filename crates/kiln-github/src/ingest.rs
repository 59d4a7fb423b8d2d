//! Ingest of existing task files: SWE-bench JSON or JSONL, and Multi-SWE-bench JSONL.
//!
//! A bad entry is data, not an error: it becomes a [`Candidate`] with status `error` that names
//! the file and line, and the rest of the file is still read. Only a file that cannot be read at
//! all is an [`IngestError`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kiln_schema::{Candidate, CandidateStatus, IdError, InstanceId};
use serde_json::{Map, Value};

/// Why a task file could not be ingested at all.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// The file could not be opened or read.
    #[error("read the task file {}: {source}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// The underlying IO error.
        #[source]
        source: std::io::Error,
    },
}

/// Reads a task file into candidates, one per task, in file order.
///
/// Accepted formats, detected from the content rather than the file extension:
/// - SWE-bench JSON: one array of task objects (as `datasets` exports it);
/// - JSONL, one object per line, where each line is either a SWE-bench task (`instance_id`,
///   `repo`, `base_commit`, `patch`, `test_patch`, ...) or a Multi-SWE-bench task (`org`, `repo`,
///   `number`, `base.sha`, `fix_patch`, `test_patch`, `resolved_issues`, `f2p_tests`, ...). The
///   format is detected per line, so a file mixing both is read too.
///
/// `FAIL_TO_PASS` and `PASS_TO_PASS` may be real lists or JSON strings holding a list (as in the
/// SWE-bench datasets). For Multi-SWE-bench, the given FAIL_TO_PASS is the union of the keys of
/// `f2p_tests`, `s2p_tests` and `n2p_tests`, and the given PASS_TO_PASS the keys of `p2p_tests`.
///
/// Empty lines are skipped; CRLF line ends and a UTF-8 byte order mark are accepted. Every row's
/// `origin` is `<file name>:<line>`. A malformed entry (bad JSON, a missing or mistyped required
/// field, a duplicate `instance_id`) becomes a row with status `error`, `error` set to
/// `<file name>:<line>: <what>`, the task's `instance_id` when it could be read (otherwise the
/// placeholder `invalid-line-<line>`, or `invalid-entry-<n>` for the n-th entry of a JSON array),
/// and every other field empty.
///
/// # Errors
/// [`IngestError::Read`] when the file cannot be read.
pub fn read_task_file(path: &Path) -> Result<Vec<Candidate>, IngestError> {
    let bytes = std::fs::read(path).map_err(|source| IngestError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let file_name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(parse_task_bytes(&file_name, &bytes))
}

/// The rows of a task file read as JSON objects by someone else (a Parquet file as the Hugging
/// Face Hub publishes SWE-bench, SWE-bench Verified, SWE-bench-Live, SWE-rebench or
/// Multi-SWE-bench, read by `kiln_store::read_parquet_objects`), with the rules and per-row
/// errors of [`read_task_file`]; row `n` (from 1) stands where a line would, in `origin` and
/// in the placeholder ids.
#[must_use]
pub fn read_task_objects(file_name: &str, objects: Vec<Map<String, Value>>) -> Vec<Candidate> {
    let texts: Vec<String> = objects
        .into_iter()
        .map(|object| Value::Object(object).to_string())
        .collect();
    let entries = texts
        .iter()
        .enumerate()
        .map(|(index, text)| Entry {
            line: index + 1,
            text: Ok(text.as_str()),
            placeholder: InstanceId::placeholder("invalid-line", index + 1),
        })
        .collect();
    build_rows(file_name, entries)
}

/// One entry of the file before it is turned into a row.
struct Entry<'a> {
    /// 1-based line where the entry starts.
    line: usize,
    /// The entry's JSON text, or why there is none.
    text: Result<&'a str, String>,
    /// Placeholder id used when the entry's own id cannot be read.
    placeholder: InstanceId,
}

/// Parses the content of a task file named `file_name`.
fn parse_task_bytes(file_name: &str, bytes: &[u8]) -> Vec<Candidate> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        // A JSON array is one document; invalid UTF-8 inside it is replaced rather than failing
        // the whole file, so it surfaces as a bad string in the affected entry at worst.
        let text = String::from_utf8_lossy(bytes);
        let entries = split_json_array(&text);
        build_rows(file_name, entries)
    } else {
        build_rows(file_name, split_lines(bytes))
    }
}

/// Splits JSONL content into its non-empty lines.
fn split_lines(bytes: &[u8]) -> Vec<Entry<'_>> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter_map(|(index, raw)| {
            let line = index + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            let text = std::str::from_utf8(raw).map_err(|e| format!("not valid UTF-8: {e}"));
            Some(Entry {
                line,
                text,
                placeholder: InstanceId::placeholder("invalid-line", line),
            })
        })
        .collect()
}

/// Splits a JSON array document into the text of its top-level entries, with their lines.
///
/// Entries are cut at top-level commas by a small scanner instead of parsing the whole array at
/// once, so that one bad entry does not hide the good ones and each entry keeps its own line.
fn split_json_array(text: &str) -> Vec<Entry<'_>> {
    let mut entries = Vec::new();
    let mut line = 1;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut opened = false;
    let mut closed = false;
    // (byte offset, line) where the current entry started.
    let mut start: Option<(usize, usize)> = None;
    let mut entry_count = 0usize;
    let mut trailing_error: Option<(usize, String)> = None;
    for (offset, c) in text.char_indices() {
        if c == '\n' {
            line += 1;
        }
        if closed {
            if !c.is_whitespace() && trailing_error.is_none() {
                trailing_error = Some((line, "unexpected content after the JSON array".into()));
            }
            continue;
        }
        if !opened {
            // Everything before the `[` is whitespace: the caller checked.
            opened = c == '[';
            continue;
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if depth == 0 && (c == ',' || c == ']') {
            let slice = start.take().map(|(s, l)| (text[s..offset].trim_end(), l));
            // `[]` is an empty array, not an empty entry.
            if slice.is_some() || c == ',' || entry_count > 0 {
                push_entry(&mut entries, &mut entry_count, slice, line);
            }
            closed = c == ']';
            continue;
        }
        if start.is_none() && !c.is_whitespace() {
            start = Some((offset, line));
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if !closed {
        if let Some((s, l)) = start.take() {
            push_entry(
                &mut entries,
                &mut entry_count,
                Some((text[s..].trim_end(), l)),
                line,
            );
        }
        trailing_error = Some((line, "unterminated JSON array (missing `]`)".into()));
    }
    if let Some((line, what)) = trailing_error {
        entries.push(Entry {
            line,
            text: Err(what),
            placeholder: InstanceId::placeholder("invalid-line", line),
        });
    }
    entries
}

/// Appends the next array entry: its text and start line, or an empty-entry error at `end_line`.
fn push_entry<'a>(
    entries: &mut Vec<Entry<'a>>,
    count: &mut usize,
    slice: Option<(&'a str, usize)>,
    end_line: usize,
) {
    *count += 1;
    let (line, text) = match slice {
        Some((s, l)) => (l, Ok(s)),
        None => (end_line, Err("empty array entry".to_string())),
    };
    entries.push(Entry {
        line,
        text,
        placeholder: InstanceId::placeholder("invalid-entry", *count),
    });
}

/// Why one entry could not become a candidate.
struct EntryError {
    /// The task's id, when it could be read despite the error.
    instance_id: Option<InstanceId>,
    /// What was wrong.
    what: String,
}

impl EntryError {
    fn new(instance_id: Option<InstanceId>, what: impl Into<String>) -> Self {
        Self {
            instance_id,
            what: what.into(),
        }
    }
}

/// Turns entries into rows, marking bad and duplicate entries as error rows.
fn build_rows(file_name: &str, entries: Vec<Entry<'_>>) -> Vec<Candidate> {
    // instance_id -> line of its first row, to keep ids unique within the file.
    let mut seen: HashMap<InstanceId, usize> = HashMap::new();
    let mut rows = Vec::with_capacity(entries.len());
    for entry in entries {
        let origin = format!("{file_name}:{}", entry.line);
        let parsed = match entry.text {
            Ok(text) => parse_entry(text, &origin),
            Err(what) => Err(EntryError::new(None, what)),
        };
        let row = match parsed {
            Ok(candidate) => match seen.get(&candidate.instance_id) {
                Some(first) => error_row(
                    entry.placeholder,
                    &origin,
                    &format!(
                        "duplicate instance_id `{}` (first on line {first})",
                        candidate.instance_id
                    ),
                ),
                None => candidate,
            },
            Err(err) => {
                let id = match err.instance_id {
                    Some(id) if !seen.contains_key(&id) => id,
                    _ => entry.placeholder,
                };
                error_row(id, &origin, &err.what)
            }
        };
        seen.entry(row.instance_id.clone()).or_insert(entry.line);
        rows.push(row);
    }
    rows
}

/// An error row: status `error`, everything but the id, error and origin empty.
fn error_row(instance_id: InstanceId, origin: &str, what: &str) -> Candidate {
    Candidate {
        status: CandidateStatus::Error,
        error: Some(format!("{origin}: {what}")),
        origin: origin.to_string(),
        ..Candidate::new(instance_id)
    }
}

/// Parses one entry's JSON text, detecting its format.
fn parse_entry(text: &str, origin: &str) -> Result<Candidate, EntryError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| EntryError::new(None, format!("invalid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(EntryError::new(
            None,
            format!("expected a JSON object, found {}", kind(&value)),
        ));
    };
    // Multi-SWE-bench rows name the repository by `org` + `repo` and carry `fix_patch`;
    // SWE-bench rows never have either of the first two keys.
    if obj.contains_key("org") || obj.contains_key("fix_patch") {
        parse_multi_swe_bench(&obj, origin)
    } else {
        parse_swe_bench(&obj, origin)
    }
}

/// A SWE-bench row.
fn parse_swe_bench(obj: &Map<String, Value>, origin: &str) -> Result<Candidate, EntryError> {
    let instance_id = check_id(&required_str(obj, "instance_id", None)?)?;
    let id = Some(instance_id.clone());
    let repo = required_str(obj, "repo", id.clone())?;
    check_repo(&repo, id.clone())?;
    let base_commit = required_str(obj, "base_commit", id.clone())?;
    check_commit(&base_commit, "base_commit", id.clone())?;
    let patch = required_str(obj, "patch", id.clone())?;
    let test_patch = required_str(obj, "test_patch", id.clone())?;
    let pull_number = match obj.get("pull_number") {
        None | Some(Value::Null) => pull_number_from_id(instance_id.as_str()),
        Some(v) => Some(integer(v, "pull_number", id.clone())?),
    };
    Ok(Candidate {
        status: CandidateStatus::Ok,
        error: None,
        repo,
        pull_number,
        base_commit,
        patch,
        test_patch,
        problem_statement: optional_str(obj, "problem_statement", id.clone())?.unwrap_or_default(),
        hints_text: optional_str(obj, "hints_text", id.clone())?.unwrap_or_default(),
        created_at: optional_str(obj, "created_at", id.clone())?.unwrap_or_default(),
        version: version(obj, id.clone())?,
        language: optional_str(obj, "language", id.clone())?,
        given_fail_to_pass: test_list(obj, "FAIL_TO_PASS", id.clone())?,
        given_pass_to_pass: test_list(obj, "PASS_TO_PASS", id)?,
        origin: origin.to_string(),
        ..Candidate::new(instance_id)
    })
}

/// A Multi-SWE-bench row.
fn parse_multi_swe_bench(obj: &Map<String, Value>, origin: &str) -> Result<Candidate, EntryError> {
    // The id is derivable only once org, repo and number are all readable.
    let org = required_str(obj, "org", None)?;
    let name = required_str(obj, "repo", None)?;
    let number = match obj.get("number") {
        None | Some(Value::Null) => return Err(EntryError::new(None, "missing field `number`")),
        Some(v) => integer(v, "number", None)?,
    };
    let repo = format!("{org}/{name}");
    check_repo(&repo, None)?;
    let instance_id = check_id(&format!("{org}__{name}-{number}"))?;
    let id = Some(instance_id.clone());
    let base_commit = match obj.get("base") {
        Some(Value::Object(base)) => required_str(base, "sha", id.clone())
            .map_err(|e| EntryError::new(id.clone(), e.what.replace("`sha`", "`base.sha`")))?,
        None | Some(Value::Null) => {
            return Err(EntryError::new(id, "missing field `base.sha`"));
        }
        Some(other) => {
            return Err(EntryError::new(
                id,
                format!("field `base` must be an object, found {}", kind(other)),
            ));
        }
    };
    check_commit(&base_commit, "base.sha", id.clone())?;
    let patch = required_str(obj, "fix_patch", id.clone())?;
    let test_patch = required_str(obj, "test_patch", id.clone())?;
    let problem_statement = resolved_issues(obj, id.clone())?;
    let issue_numbers: Vec<String> = match obj.get("resolved_issues") {
        Some(Value::Array(issues)) => issues
            .iter()
            .filter_map(|i| i.get("number"))
            .filter_map(|n| match n {
                Value::Number(n) => Some(n.to_string()),
                Value::String(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let hints_text = match optional_str(obj, "hints_text", id.clone())? {
        Some(hints) => hints,
        None => optional_str(obj, "hints", id.clone())?.unwrap_or_default(),
    };
    let mut fail_to_pass = Vec::new();
    for key in ["f2p_tests", "s2p_tests", "n2p_tests"] {
        fail_to_pass.extend(test_names(obj, key, id.clone())?);
    }
    fail_to_pass.sort();
    fail_to_pass.dedup();
    Ok(Candidate {
        status: CandidateStatus::Ok,
        error: None,
        repo,
        pull_number: Some(number),
        base_commit,
        patch,
        test_patch,
        problem_statement,
        hints_text,
        created_at: optional_str(obj, "created_at", id.clone())?.unwrap_or_default(),
        version: version(obj, id.clone())?,
        language: optional_str(obj, "language", id.clone())?,
        given_fail_to_pass: fail_to_pass,
        given_pass_to_pass: test_names(obj, "p2p_tests", id)?,
        issue_numbers,
        origin: origin.to_string(),
        ..Candidate::new(instance_id)
    })
}

/// JSON type name for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A string field that must be present.
fn required_str(
    obj: &Map<String, Value>,
    key: &str,
    id: Option<InstanceId>,
) -> Result<String, EntryError> {
    optional_str(obj, key, id.clone())?
        .ok_or_else(|| EntryError::new(id, format!("missing field `{key}`")))
}

/// A string field that may be absent or null.
fn optional_str(
    obj: &Map<String, Value>,
    key: &str,
    id: Option<InstanceId>,
) -> Result<Option<String>, EntryError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(EntryError::new(
            id,
            format!("field `{key}` must be a string, found {}", kind(other)),
        )),
    }
}

/// An integer given as a JSON number or a numeric string.
fn integer(value: &Value, key: &str, id: Option<InstanceId>) -> Result<i64, EntryError> {
    let parsed = match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        EntryError::new(
            id,
            format!("field `{key}` must be an integer, found {value}"),
        )
    })
}

/// The instance id must be one names can be derived from ([`InstanceId`]). A row that breaks
/// the rule keeps the line's placeholder as its id, so no later stage ever sees the text.
fn check_id(instance_id: &str) -> Result<InstanceId, EntryError> {
    match InstanceId::new(instance_id) {
        Ok(id) => Ok(id),
        Err(IdError::Invalid { shown, reason }) => Err(EntryError::new(
            None,
            format!("field `instance_id` \"{shown}\" {reason}"),
        )),
    }
}

/// The repository must be a GitHub `owner/name` (letters, digits, `-`, `_`, `.`): it becomes a
/// clone URL, a path in the mirror cache and an argument of git.
fn check_repo(repo: &str, id: Option<InstanceId>) -> Result<(), EntryError> {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 100
            && p != "."
            && p != ".."
            && !p.starts_with('-')
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    match repo.split_once('/') {
        Some((owner, name)) if part(owner) && part(name) => Ok(()),
        _ => Err(EntryError::new(
            id,
            format!(
                "field `repo` must be a GitHub `owner/name`, found \"{}\"",
                kiln_schema::shown(repo)
            ),
        )),
    }
}

/// A commit must be a hexadecimal object id (7 to 64 digits): it is handed to git as an
/// argument, where anything else could be read as an option.
fn check_commit(commit: &str, key: &str, id: Option<InstanceId>) -> Result<(), EntryError> {
    if (7..=64).contains(&commit.len()) && commit.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(EntryError::new(
            id,
            format!(
                "field `{key}` must be a commit id (7 to 64 hexadecimal digits), found \"{}\"",
                kiln_schema::shown(commit)
            ),
        ))
    }
}

/// SWE-bench ids end in `-<PR number>`.
fn pull_number_from_id(instance_id: &str) -> Option<i64> {
    instance_id.rsplit_once('-')?.1.parse().ok()
}

/// `version` is a string in SWE-bench, but some exports store it as a number (`0.2`).
fn version(obj: &Map<String, Value>, id: Option<InstanceId>) -> Result<Option<String>, EntryError> {
    match obj.get("version") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(EntryError::new(
            id,
            format!("field `version` must be a string, found {}", kind(other)),
        )),
    }
}

/// A list of test ids: a real JSON list, or a string holding one (SWE-bench's encoding).
fn test_list(
    obj: &Map<String, Value>,
    key: &str,
    id: Option<InstanceId>,
) -> Result<Vec<String>, EntryError> {
    let bad = |what: String| EntryError::new(id.clone(), format!("field `{key}` {what}"));
    let decoded;
    let value = match obj.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
        Some(Value::String(s)) => {
            decoded = serde_json::from_str::<Value>(s)
                .map_err(|e| bad(format!("is a string but not a JSON list: {e}")))?;
            &decoded
        }
        Some(v) => v,
    };
    let Value::Array(items) = value else {
        return Err(bad(format!("must be a list, found {}", kind(value))));
    };
    items
        .iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(bad(format!("must hold strings, found {}", kind(other)))),
        })
        .collect()
}

/// Multi-SWE-bench test maps: objects keyed by test name (a plain list is accepted too).
fn test_names(
    obj: &Map<String, Value>,
    key: &str,
    id: Option<InstanceId>,
) -> Result<Vec<String>, EntryError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.keys().cloned().collect()),
        Some(Value::Array(_)) => test_list(obj, key, id),
        Some(other) => Err(EntryError::new(
            id,
            format!("field `{key}` must be an object, found {}", kind(other)),
        )),
    }
}

/// The problem statement from `resolved_issues`: each issue's title and body, in order.
fn resolved_issues(obj: &Map<String, Value>, id: Option<InstanceId>) -> Result<String, EntryError> {
    let issues = match obj.get("resolved_issues") {
        None | Some(Value::Null) => return Ok(String::new()),
        Some(Value::Array(issues)) => issues,
        Some(other) => {
            return Err(EntryError::new(
                id,
                format!(
                    "field `resolved_issues` must be a list, found {}",
                    kind(other)
                ),
            ));
        }
    };
    let mut parts = Vec::with_capacity(issues.len());
    for issue in issues {
        let Value::Object(issue) = issue else {
            return Err(EntryError::new(
                id,
                format!(
                    "field `resolved_issues` must hold objects, found {}",
                    kind(issue)
                ),
            ));
        };
        let title = optional_str(issue, "title", id.clone())?.unwrap_or_default();
        let body = optional_str(issue, "body", id.clone())?.unwrap_or_default();
        parts.push(match (title.is_empty(), body.is_empty()) {
            (false, false) => format!("{title}\n{body}"),
            (false, true) => title,
            _ => body,
        });
    }
    Ok(parts.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn swe(id: &str) -> Value {
        json!({
            "instance_id": id,
            "repo": "kiln-demo/calc",
            "base_commit": "0123456789abcdef0123456789abcdef01234567",
            "patch": "diff --git a/src/x.py b/src/x.py\n",
            "test_patch": "diff --git a/tests/t.py b/tests/t.py\n",
            "problem_statement": "It breaks.",
            "hints_text": "",
            "created_at": "2024-05-01T10:00:00Z",
            "version": "0.1",
            "FAIL_TO_PASS": "[\"tests/t.py::test_a\", \"tests/t.py::test_p[1 + 2-3]\"]",
            "PASS_TO_PASS": "[]",
            "environment_setup_commit": "0123456789abcdef0123456789abcdef01234567"
        })
    }

    fn multi() -> Value {
        json!({
            "org": "cli", "repo": "cli", "number": 513, "state": "closed",
            "base": {"label": "cli:trunk", "ref": "trunk", "sha": "abc1234"},
            "resolved_issues": [
                {"number": 1, "title": "Crash on start", "body": "Steps: run it."},
                {"number": 2, "title": "Also this", "body": null}
            ],
            "fix_patch": "diff --git a/a.go b/a.go\n",
            "test_patch": "diff --git a/a_test.go b/a_test.go\n",
            "f2p_tests": {"TestB": {"run": "NONE", "test": "FAIL", "fix": "PASS"}},
            "s2p_tests": {"TestS": {"run": "NONE", "test": "SKIP", "fix": "PASS"}},
            "n2p_tests": {"TestA": {"run": "NONE", "test": "NONE", "fix": "PASS"}},
            "p2p_tests": {"TestOld": {"run": "PASS", "test": "PASS", "fix": "PASS"}},
            "fixed_tests": {}
        })
    }

    fn lines(values: &[String]) -> Vec<u8> {
        values.join("\n").into_bytes()
    }

    #[test]
    fn swe_bench_jsonl_with_string_encoded_lists() {
        let rows = parse_task_bytes("t.jsonl", &lines(&[swe("o__r-12").to_string()]));
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.status.as_str(), "ok");
        assert_eq!(row.error, None);
        assert_eq!(row.instance_id, "o__r-12");
        assert_eq!(row.repo, "kiln-demo/calc");
        assert_eq!(row.pull_number, Some(12));
        assert_eq!(row.version.as_deref(), Some("0.1"));
        assert_eq!(row.created_at, "2024-05-01T10:00:00Z");
        assert_eq!(
            row.given_fail_to_pass,
            vec!["tests/t.py::test_a", "tests/t.py::test_p[1 + 2-3]"]
        );
        assert!(row.given_pass_to_pass.is_empty());
        assert_eq!(row.origin, "t.jsonl:1");
    }

    #[test]
    fn swe_bench_real_lists_and_numeric_version() {
        let mut v = swe("o__r-1");
        v["FAIL_TO_PASS"] = json!(["a::b"]);
        v["PASS_TO_PASS"] = json!(["a::c", "a::d"]);
        v["version"] = json!(2.1);
        v["pull_number"] = json!(77);
        let rows = parse_task_bytes("t.jsonl", &lines(&[v.to_string()]));
        assert_eq!(rows[0].status.as_str(), "ok", "{:?}", rows[0].error);
        assert_eq!(rows[0].given_fail_to_pass, vec!["a::b"]);
        assert_eq!(rows[0].given_pass_to_pass, vec!["a::c", "a::d"]);
        assert_eq!(rows[0].version.as_deref(), Some("2.1"));
        assert_eq!(rows[0].pull_number, Some(77));
    }

    #[test]
    fn swe_bench_json_array_keeps_entry_lines() {
        let text = format!(
            "[\n  {},\n  {}\n]\n",
            serde_json::to_string_pretty(&swe("o__r-1")).unwrap_or_default(),
            swe("o__r-2")
        );
        let first_entry_lines = serde_json::to_string_pretty(&swe("o__r-1"))
            .unwrap_or_default()
            .lines()
            .count();
        let rows = parse_task_bytes("tasks.json", text.as_bytes());
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.status.as_str() == "ok"));
        assert_eq!(rows[0].origin, "tasks.json:2");
        assert_eq!(
            rows[1].origin,
            format!("tasks.json:{}", 2 + first_entry_lines)
        );
        assert_eq!(rows[1].instance_id, "o__r-2");
    }

    #[test]
    fn json_array_on_one_line_with_a_bad_entry() {
        // Braces and commas inside strings must not split entries.
        let mut tricky = swe("o__r-3");
        tricky["problem_statement"] = json!("a, {b} [c] \"d\" \\");
        let text = format!("[{tricky}, 42, {}]", swe("o__r-4"));
        let rows = parse_task_bytes("tasks.json", text.as_bytes());
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].status.as_str(), "ok");
        assert_eq!(rows[0].problem_statement, "a, {b} [c] \"d\" \\");
        assert_eq!(rows[1].status.as_str(), "error");
        assert_eq!(rows[1].instance_id, "invalid-entry-2");
        assert_eq!(
            rows[1].error.as_deref(),
            Some("tasks.json:1: expected a JSON object, found a number")
        );
        assert_eq!(rows[2].instance_id, "o__r-4");
    }

    #[test]
    fn empty_and_broken_arrays() {
        assert!(parse_task_bytes("e.json", b" [ ]\n").is_empty());
        let rows = parse_task_bytes("e.json", format!("[{}", swe("o__r-1")).as_bytes());
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].status.as_str(), "ok");
        assert_eq!(rows[1].status.as_str(), "error");
        assert!(
            rows[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("unterminated"))
        );
        let rows = parse_task_bytes("e.json", format!("[{}]\nx", swe("o__r-1")).as_bytes());
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].instance_id, "invalid-line-2");
    }

    #[test]
    fn multi_swe_bench_line() {
        let rows = parse_task_bytes("m.jsonl", &lines(&[multi().to_string()]));
        let row = &rows[0];
        assert_eq!(row.status.as_str(), "ok", "{:?}", row.error);
        assert_eq!(row.instance_id, "cli__cli-513");
        assert_eq!(row.repo, "cli/cli");
        assert_eq!(row.pull_number, Some(513));
        assert_eq!(row.base_commit, "abc1234");
        assert_eq!(row.patch, "diff --git a/a.go b/a.go\n");
        assert_eq!(
            row.problem_statement,
            "Crash on start\nSteps: run it.\n\nAlso this"
        );
        assert_eq!(row.given_fail_to_pass, vec!["TestA", "TestB", "TestS"]);
        assert_eq!(row.given_pass_to_pass, vec!["TestOld"]);
    }

    #[test]
    fn mixed_formats_crlf_empty_lines_and_bom() {
        let text = format!("\u{feff}{}\r\n\r\n   \n{}\r\n", swe("o__r-1"), multi());
        let rows = parse_task_bytes("mix.jsonl", text.as_bytes());
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].instance_id, "o__r-1");
        assert_eq!(rows[0].status.as_str(), "ok");
        assert_eq!(rows[1].instance_id, "cli__cli-513");
        assert_eq!(rows[1].origin, "mix.jsonl:4");
        assert_eq!(rows[1].status.as_str(), "ok");
    }

    #[test]
    fn malformed_lines_become_error_rows() {
        let mut no_base = swe("o__r-2");
        no_base.as_object_mut().map(|o| o.remove("base_commit"));
        let mut bad_list = swe("o__r-3");
        bad_list["FAIL_TO_PASS"] = json!("not a list");
        let text = lines(&[
            swe("o__r-1").to_string(),
            "{\"instance_id\": \"o__r-9\", ".into(),
            no_base.to_string(),
            bad_list.to_string(),
            "[1, 2]".into(),
            swe("o__r-5").to_string(),
        ]);
        let rows = parse_task_bytes("bad.jsonl", &text);
        assert_eq!(rows.len(), 6);
        let statuses: Vec<_> = rows.iter().map(|r| r.status.as_str()).collect();
        assert_eq!(statuses, ["ok", "error", "error", "error", "error", "ok"]);
        assert_eq!(rows[1].instance_id, "invalid-line-2");
        assert!(
            rows[1]
                .error
                .as_deref()
                .is_some_and(|e| e.starts_with("bad.jsonl:2: invalid JSON"))
        );
        assert_eq!(rows[2].instance_id, "o__r-2");
        assert_eq!(
            rows[2].error.as_deref(),
            Some("bad.jsonl:3: missing field `base_commit`")
        );
        assert_eq!(rows[2].repo, "");
        assert_eq!(rows[2].patch, "");
        assert_eq!(rows[2].origin, "bad.jsonl:3");
        assert_eq!(rows[3].instance_id, "o__r-3");
        assert!(
            rows[3]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("`FAIL_TO_PASS` is a string but not a JSON list"))
        );
        assert_eq!(rows[4].instance_id, "invalid-line-5");
        assert_eq!(rows[5].origin, "bad.jsonl:6");
    }

    #[test]
    fn mistyped_and_missing_fields() {
        let mut wrong_type = swe("o__r-1");
        wrong_type["patch"] = json!(5);
        let mut bad_repo = swe("o__r-2");
        bad_repo["repo"] = json!("calc");
        let no_id = json!({"repo": "a/b"});
        let mut multi_no_sha = multi();
        multi_no_sha["base"] = json!({"ref": "main"});
        let mut multi_no_number = multi();
        multi_no_number.as_object_mut().map(|o| o.remove("number"));
        let text = lines(&[
            wrong_type.to_string(),
            bad_repo.to_string(),
            no_id.to_string(),
            multi_no_sha.to_string(),
            multi_no_number.to_string(),
        ]);
        let rows = parse_task_bytes("f.jsonl", &text);
        let errors: Vec<_> = rows
            .iter()
            .map(|r| (r.instance_id.as_str(), r.error.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            errors,
            [
                (
                    "o__r-1",
                    "f.jsonl:1: field `patch` must be a string, found a number"
                ),
                (
                    "o__r-2",
                    "f.jsonl:2: field `repo` must be a GitHub `owner/name`, found \"calc\""
                ),
                ("invalid-line-3", "f.jsonl:3: missing field `instance_id`"),
                ("cli__cli-513", "f.jsonl:4: missing field `base.sha`"),
                ("invalid-line-5", "f.jsonl:5: missing field `number`"),
            ]
        );
    }

    #[test]
    fn hostile_ids_repositories_and_commits_become_error_rows_under_a_placeholder() {
        let with = |key: &str, value: &str| {
            let mut row = swe("o__r-1");
            row[key] = value.into();
            row.to_string()
        };
        let mut multi_hostile = multi();
        multi_hostile["repo"] = "cli\nRUN true".into();
        let text = lines(&[
            with("instance_id", "../x"),
            with("instance_id", "x\nRUN touch /tmp/pwned"),
            with("instance_id", "/etc"),
            with("repo", "kiln-demo/../../etc"),
            with("repo", "--upload-pack=touch x/y"),
            with("base_commit", "--upload-pack=touch /tmp/pwned"),
            multi_hostile.to_string(),
        ]);
        let rows = parse_task_bytes("h.jsonl", &text);
        let got: Vec<(&str, &str, &str)> = rows
            .iter()
            .map(|r| {
                (
                    r.status.as_str(),
                    r.instance_id.as_str(),
                    r.error.as_deref().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "error",
                    "invalid-line-1",
                    "h.jsonl:1: field `instance_id` \"../x\" contains a path separator"
                ),
                (
                    "error",
                    "invalid-line-2",
                    "h.jsonl:2: field `instance_id` \"x\\nRUN touch /tmp/pwned\" contains a path separator"
                ),
                (
                    "error",
                    "invalid-line-3",
                    "h.jsonl:3: field `instance_id` \"/etc\" contains a path separator"
                ),
                (
                    "error",
                    "o__r-1",
                    "h.jsonl:4: field `repo` must be a GitHub `owner/name`, found \"kiln-demo/../../etc\""
                ),
                (
                    "error",
                    "invalid-line-5",
                    "h.jsonl:5: field `repo` must be a GitHub `owner/name`, found \"--upload-pack=touch x/y\""
                ),
                (
                    "error",
                    "invalid-line-6",
                    "h.jsonl:6: field `base_commit` must be a commit id (7 to 64 hexadecimal digits), found \"--upload-pack=touch /tmp/pwned\""
                ),
                (
                    "error",
                    "invalid-line-7",
                    "h.jsonl:7: field `repo` must be a GitHub `owner/name`, found \"cli/cli\\nRUN true\""
                ),
            ]
        );
        let newline = with("instance_id", "x\nRUN true");
        let rows = parse_task_bytes("n.jsonl", newline.as_bytes());
        assert_eq!(rows[0].instance_id, "invalid-line-1");
        assert_eq!(
            rows[0].error.as_deref(),
            Some("n.jsonl:1: field `instance_id` \"x\\nRUN true\" contains a line break")
        );
    }

    #[test]
    fn duplicate_ids_are_errors() {
        let text = lines(&[swe("o__r-1").to_string(), swe("o__r-1").to_string()]);
        let rows = parse_task_bytes("d.jsonl", &text);
        assert_eq!(rows[0].status.as_str(), "ok");
        assert_eq!(rows[1].status.as_str(), "error");
        assert_eq!(rows[1].instance_id, "invalid-line-2");
        assert_eq!(
            rows[1].error.as_deref(),
            Some("d.jsonl:2: duplicate instance_id `o__r-1` (first on line 1)")
        );
    }

    #[test]
    fn invalid_utf8_line_is_an_error_row() {
        let mut text = swe("o__r-1").to_string().into_bytes();
        text.extend_from_slice(b"\n{\"instance_id\": \"\xff\"}\n");
        let rows = parse_task_bytes("u.jsonl", &text);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].instance_id, "invalid-line-2");
        assert!(
            rows[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("not valid UTF-8"))
        );
    }

    #[test]
    fn read_task_file_reads_and_reports_unreadable_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tasks.jsonl");
        std::fs::write(&path, swe("o__r-1").to_string()).expect("write");
        let rows = read_task_file(&path).expect("read");
        assert_eq!(rows[0].origin, "tasks.jsonl:1");
        let missing = dir.path().join("missing.jsonl");
        let err = read_task_file(&missing).err();
        assert!(
            matches!(&err, Some(IngestError::Read { path, .. }) if path == &missing),
            "{err:?}"
        );
    }
}
