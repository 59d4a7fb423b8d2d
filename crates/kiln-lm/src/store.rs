//! The run's LM answers on disk, so that a re-run replays them and a release can say which
//! answers made it.
//!
//! ```text
//! <run>/lm/answers/<key>.json   one request and its answer (or its failure), by replay key
//! <run>/lm/spent.json           what the whole run has paid: requests, tokens, dollars
//! ```
//!
//! Every file is written to a temporary name in the same directory, fsynced and renamed, so a
//! crash leaves the old file or the new one, never half of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Directory of a run that holds the LM answers.
pub const LM_DIR: &str = "lm";
/// Format version of [`StoredAnswer`] files.
pub const ANSWER_FORMAT: u32 = 1;

/// One request to the endpoint and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAnswer {
    /// [`ANSWER_FORMAT`].
    pub format: u32,
    /// The replay key (a hash of model, messages and parameters).
    pub key: String,
    /// The stage that asked.
    pub stage: String,
    /// The instance it was asked about.
    pub instance_id: String,
    /// The endpoint's base URL (no credentials).
    pub endpoint: String,
    /// The model asked.
    pub model: String,
    /// When it was asked (RFC 3339, UTC).
    pub asked_at: String,
    /// HTTP requests it took.
    pub attempts: u32,
    /// Whether `response_format` `json_schema` was sent.
    pub structured: bool,
    /// The answer's text.
    pub content: Option<String>,
    /// The model's refusal, if it declined.
    pub refusal: Option<String>,
    /// The tools the model called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<kiln_core::lm::ToolCall>,
    /// Why the completion ended.
    pub finish_reason: Option<String>,
    /// The model the endpoint says answered.
    pub response_model: Option<String>,
    /// The endpoint's completion id.
    pub response_id: Option<String>,
    /// Prompt tokens from `usage`.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens from `usage`.
    pub completion_tokens: Option<u64>,
    /// US dollars at the config's price for the model (null without a price).
    pub cost_usd: Option<f64>,
    /// Why no answer came (then the record is kept for the audit but never replayed).
    pub error: Option<String>,
    /// The request body as sent (no key: it travels in a header that is never stored).
    pub request: serde_json::Value,
    /// The response body as received (null when none came).
    pub response: serde_json::Value,
}

/// What a run has paid the endpoint, over all its stages and re-runs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Spent {
    /// HTTP requests sent.
    pub requests: u64,
    /// Prompt tokens reported.
    pub prompt_tokens: u64,
    /// Completion tokens reported.
    pub completion_tokens: u64,
    /// US dollars at the config's prices.
    pub cost_usd: f64,
}

/// The answers of one run.
#[derive(Debug, Clone)]
pub struct AnswerStore {
    dir: PathBuf,
}

impl AnswerStore {
    /// Opens (creating) `<run_dir>/lm/`.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn open(run_dir: &Path) -> Result<Self, Error> {
        let dir = run_dir.join(LM_DIR);
        let answers = dir.join("answers");
        std::fs::create_dir_all(&answers).map_err(|e| Error::io("create", &answers, e))?;
        Ok(Self { dir })
    }

    /// The `lm/` directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn answer_path(&self, key: &str) -> PathBuf {
        self.dir.join("answers").join(format!("{key}.json"))
    }

    /// The stored record for `key`, if any.
    ///
    /// # Errors
    /// When the file exists but cannot be read or parsed.
    pub fn load(&self, key: &str) -> Result<Option<StoredAnswer>, Error> {
        read_json(&self.answer_path(key))
    }

    /// Stores a record under its key, replacing an earlier one.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, answer: &StoredAnswer) -> Result<(), Error> {
        write_json(&self.answer_path(&answer.key), answer)
    }

    /// What the run has paid so far (zero for a run that never asked).
    ///
    /// # Errors
    /// When `spent.json` exists but cannot be read.
    pub fn spent(&self) -> Result<Spent, Error> {
        Ok(read_json(&self.dir.join("spent.json"))?.unwrap_or_default())
    }

    /// Replaces what the run has paid.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save_spent(&self, spent: &Spent) -> Result<(), Error> {
        write_json(&self.dir.join("spent.json"), spent)
    }
}

/// What a run has paid, read without creating anything (`None` for a run that never asked).
///
/// # Errors
/// When `spent.json` exists but cannot be read.
pub fn read_spent(run_dir: &Path) -> Result<Option<Spent>, Error> {
    read_json(&run_dir.join(LM_DIR).join("spent.json"))
}

/// The stored records for `keys` in a run, skipping keys with no record.
///
/// # Errors
/// When a record exists but cannot be read.
pub fn read_answers(run_dir: &Path, keys: &[String]) -> Result<Vec<StoredAnswer>, Error> {
    let dir = run_dir.join(LM_DIR).join("answers");
    let mut out = Vec::new();
    for key in keys {
        // Keys come from rows; anything but a hex digest is not a key this crate wrote.
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if let Some(answer) = read_json(&dir.join(format!("{key}.json")))? {
            out.push(answer);
        }
    }
    Ok(out)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::Json {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Writes JSON atomically: a temporary file in the same directory, fsynced, renamed over the
/// target, and the directory fsynced so the rename survives a power loss.
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| Error::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io("create", dir, e))?;
    temp.write_all(&bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| Error::io("write", temp.path(), e))?;
    temp.persist(path)
        .map_err(|e| Error::io("rename into", path, e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str) -> StoredAnswer {
        StoredAnswer {
            format: ANSWER_FORMAT,
            key: key.into(),
            stage: "filter".into(),
            instance_id: "o__r-1".into(),
            endpoint: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            asked_at: "2026-01-01T00:00:00Z".into(),
            attempts: 1,
            structured: true,
            content: Some("{}".into()),
            refusal: None,
            tool_calls: Vec::new(),
            finish_reason: Some("stop".into()),
            response_model: None,
            response_id: None,
            prompt_tokens: Some(3),
            completion_tokens: Some(1),
            cost_usd: None,
            error: None,
            request: serde_json::json!({"model": "m"}),
            response: serde_json::Value::Null,
        }
    }

    #[test]
    fn records_and_spending_survive_a_reopen() {
        let tmp = tempfile::tempdir().unwrap();
        let store = AnswerStore::open(tmp.path()).unwrap();
        assert_eq!(store.load("ab").unwrap(), None);
        assert_eq!(read_spent(tmp.path()).unwrap(), None);
        store.save(&record("ab")).unwrap();
        let spent = Spent {
            requests: 2,
            prompt_tokens: 10,
            completion_tokens: 4,
            cost_usd: 0.5,
        };
        store.save_spent(&spent).unwrap();
        let again = AnswerStore::open(tmp.path()).unwrap();
        assert_eq!(again.load("ab").unwrap(), Some(record("ab")));
        assert_eq!(again.spent().unwrap(), spent);
        let listed = read_answers(tmp.path(), &["ab".into(), "cd".into(), "../x".into()]).unwrap();
        assert_eq!(listed, vec![record("ab")]);
        // Only the two files remain: no temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(tmp.path().join("lm/answers"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["ab.json"]);
    }

    #[test]
    fn a_corrupt_record_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let store = AnswerStore::open(tmp.path()).unwrap();
        std::fs::write(tmp.path().join("lm/answers/ab.json"), "{not json").unwrap();
        let error = store.load("ab").unwrap_err().to_string();
        assert!(error.contains("lm/answers/ab.json"), "{error}");
    }
}
