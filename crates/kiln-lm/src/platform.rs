//! The OS split: keyword evidence first, the LM only where the evidence is mixed.

use kiln_core::config::SplitSettings;
use kiln_schema::{Candidate, PlatformLabel};

use crate::asker::{Asked, Asker};
use crate::error::Error;
use crate::judge::{RowCost, unusable};
use crate::prompts::{parse_split_answer, split_request};

/// Name recorded in `PlatformLabel::labeller` when keywords decided.
pub const KEYWORD_LABELLER: &str = "keyword";

/// Words that tie a task to Windows. They are matched as whole words, case-insensitively, in the
/// problem statement and the patches; paths such as `foo/windows.py` do not count on their own.
const WINDOWS_WORDS: &[&str] = &[
    "windows",
    "win32",
    "win64",
    "msvc",
    "powershell",
    "cmd.exe",
    "wsl",
    "dll",
    "registry",
    "mingw",
];
const MACOS_WORDS: &[&str] = &["macos", "darwin", "xcode", "osx", "homebrew", "cocoa"];

/// What the keywords say about a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordEvidence {
    /// `none` (no platform word), `clear` (statement and patch name the same one platform and
    /// no other) or `mixed`.
    pub decision: &'static str,
    /// The keyword label: the platform named in both the statement and the patch (Windows
    /// before macOS), else `linux`.
    pub platform: &'static str,
    /// Every platform word found, as `problem statement: <word>` or `patch: <word>`.
    pub evidence: Vec<String>,
}

/// Reads the platform words of a candidate.
///
/// A candidate is labelled Windows or macOS only when its problem statement names the platform
/// and the gold patch touches platform-specific code too; one mention in passing ("works on
/// Linux and Windows") is not enough to take a task away from Linux, but it makes the evidence
/// mixed, which is where an LM is asked.
#[must_use]
pub fn keyword_evidence(candidate: &Candidate) -> KeywordEvidence {
    let statement = words(&candidate.problem_statement);
    let patch = words(&candidate.patch);
    let mut evidence = Vec::new();
    let mut both_sides = Vec::new();
    let mut named = Vec::new();
    for (platform, list) in [("windows", WINDOWS_WORDS), ("macos", MACOS_WORDS)] {
        let hits = |text: &[String]| -> Vec<&str> {
            list.iter()
                .copied()
                .filter(|w| text.iter().any(|t| t == w))
                .collect()
        };
        let in_statement = hits(&statement);
        let in_patch = hits(&patch);
        if !in_statement.is_empty() || !in_patch.is_empty() {
            named.push(platform);
        }
        if !in_statement.is_empty() && !in_patch.is_empty() {
            both_sides.push(platform);
        }
        evidence.extend(
            in_statement
                .iter()
                .map(|w| format!("problem statement: {w}")),
        );
        evidence.extend(in_patch.iter().map(|w| format!("patch: {w}")));
    }
    let platform = both_sides.first().copied().unwrap_or("linux");
    let decision = match (named.len(), both_sides.len()) {
        (0, _) => "none",
        (1, 1) => "clear",
        _ => "mixed",
    };
    KeywordEvidence {
        decision,
        platform,
        evidence,
    }
}

/// Labels the platform a candidate needs from keyword evidence alone.
#[must_use]
pub fn keyword_platform(candidate: &Candidate) -> PlatformLabel {
    let found = keyword_evidence(candidate);
    PlatformLabel {
        instance_id: candidate.instance_id.clone(),
        platform: found.platform.to_string(),
        evidence: found.evidence,
        labeller: KEYWORD_LABELLER.to_string(),
        keyword_evidence: found.decision.to_string(),
        reason: None,
        raw_answer: None,
        answer_keys: Vec::new(),
        fallback: None,
        prompt_tokens: None,
        completion_tokens: None,
        cost_usd: None,
    }
}

/// Labels the platform with keyword evidence, asking the LM where the evidence is mixed. The
/// row keeps both: the keywords in `evidence`, the LM's reason and raw answer beside them. An
/// unusable answer leaves the keyword label, with the reason in `fallback`.
///
/// # Errors
/// Only when the run's answer files cannot be read or written.
pub async fn lm_platform(
    candidate: &Candidate,
    settings: &SplitSettings,
    asker: &Asker,
) -> Result<PlatformLabel, Error> {
    let mut label = keyword_platform(candidate);
    let (Some(lm), Some(model)) = (&settings.lm, &settings.model) else {
        return Ok(label);
    };
    if label.keyword_evidence != "mixed" {
        return Ok(label);
    }
    let request = split_request(candidate, &label.evidence, model, lm);
    let asked = asker.ask(candidate.instance_id.as_str(), &request).await?;
    let record = match &asked {
        Asked::OverBudget { spent, limit } => {
            label.fallback = Some(format!(
                "the run's budget of ${limit} was reached (${spent:.4} spent); the LM was not asked"
            ));
            return Ok(label);
        }
        Asked::Answered { answer, .. } | Asked::Failed { answer } => answer,
    };
    let mut cost = RowCost::default();
    cost.add(record);
    label.prompt_tokens = cost.prompt_tokens;
    label.completion_tokens = cost.completion_tokens;
    label.cost_usd = cost.cost_usd;
    label.answer_keys = vec![record.key.clone()];
    label.raw_answer = record
        .content
        .as_deref()
        .map(|content| crate::judge::row_copy(content, &record.key));
    let outcome = match &asked {
        Asked::Failed { answer } => Err(answer.error.clone().unwrap_or_default()),
        _ => unusable(record, parse_split_answer),
    };
    match outcome {
        Ok(answer) => {
            label.platform = answer.platform;
            label.reason = Some(answer.reason);
            label.labeller.clone_from(model);
        }
        Err(why) => label.fallback = Some(format!("no usable LM answer ({model}: {why})")),
    }
    Ok(label)
}

fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.').to_ascii_lowercase())
        .filter(|w| !w.is_empty())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
