//! The questions kiln asks an LM, their answer schemas, and tolerant readers of the answers.
//!
//! The filter follows SWE-bench-Live's four classes (too vague, tests need requirements the
//! issue does not state, solution given away, OK; "keep when unsure") and adds SWE-rebench V2's
//! confounder flags. The split asks only whether a task needs Windows or macOS. Answers are read
//! leniently: a JSON object anywhere in the text (servers without structured output wrap it in
//! prose, code fences or a reasoning model's `<think>` block), labels in any case and spelling
//! the prompt allows, and SWE-bench-Live's class numbers.

use kiln_core::config::LmSettings;
use kiln_core::lm::{AnswerSchema, ChatMessage, ChatRequest};
use kiln_schema::{CONFOUNDER_FLAGS, Candidate};
use serde_json::{Value, json};

/// The LM filter's labels, in the order ties are broken after `ok`.
pub const FILTER_LABELS: &[&str] = &["ok", "vague", "unstated-requirements", "solution-leak"];

/// Characters of the problem statement sent; the rest is cut with a note.
const STATEMENT_CHARS: usize = 12_000;
/// Characters of each patch sent.
const PATCH_CHARS: usize = 8_000;

const FILTER_SYSTEM: &str = "You review candidate tasks for a software-engineering benchmark. \
A coding agent gets the issue text and the repository at the commit before the fix; its patch is \
graded by the tests of the pull request that fixed the issue (the test patch). Decide whether the \
task is fair. Classes:\n\
- \"vague\": the issue does not say clearly enough what is wrong or what should happen, so a \
competent engineer could not know what to build.\n\
- \"unstated-requirements\": the tests check behaviour the issue neither asks for nor lets one \
infer (names, signatures, messages, formats, one particular approach), so a correct fix of the \
issue could still fail them.\n\
- \"solution-leak\": the issue already gives the fix (code, a patch, or the exact change), so \
the task tests copying, not solving.\n\
- \"ok\": a fair task. When unsure, answer \"ok\".\n\
Also raise each of these flags that applies (flags do not change the class):\n\
- \"exact-string-assertions\": the tests compare exact strings (messages, output) that the issue \
does not give.\n\
- \"network-access\": the tests or the fix need network access.\n\
- \"multiple-issues\": the pull request addresses several separate issues.\n\
- \"image-only\": information the task needs is only in an image or a screenshot.\n\
Answer with one JSON object and nothing else: \
{\"label\": one of the classes, \"reason\": one or two sentences, \"flags\": [the flags that apply]}.";

const SPLIT_SYSTEM: &str = "You decide which operating system a software-engineering task needs. \
The task is an issue and the pull request that fixed it; its tests will run in a Linux container. \
Answer \"windows\" when the issue, the fix or the tests only make sense on Windows (Windows paths \
or drives, the registry, MSVC, PowerShell, Windows-only APIs), \"macos\" when they need macOS, and \
\"linux\" otherwise, including issues that merely mention another system and cross-platform fixes \
that Linux can test. Answer with one JSON object and nothing else: \
{\"platform\": \"linux\", \"windows\" or \"macos\", \"reason\": one sentence}.";

/// The filter question about one candidate, for one vote.
#[must_use]
pub fn filter_request(
    candidate: &Candidate,
    model: &str,
    lm: &LmSettings,
    sample: u32,
) -> ChatRequest {
    let user = format!(
        "Repository: {}\n\n## Issue\n{}\n\n## Test patch (the grading tests)\n```diff\n{}\n```\n\n\
         ## Gold patch (the reference fix; the agent does not see it)\n```diff\n{}\n```\n",
        candidate.repo,
        cut(&candidate.problem_statement, STATEMENT_CHARS),
        cut(&candidate.test_patch, PATCH_CHARS),
        cut(&candidate.patch, PATCH_CHARS),
    );
    ChatRequest {
        model: model.to_string(),
        messages: vec![ChatMessage::system(FILTER_SYSTEM), ChatMessage::user(user)],
        temperature: lm.temperature,
        max_tokens: u32::try_from(lm.max_tokens).unwrap_or(1024),
        schema: Some(AnswerSchema {
            name: "kiln_filter_verdict".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "label": {"type": "string", "enum": FILTER_LABELS},
                    "reason": {"type": "string"},
                    "flags": {"type": "array", "items": {"type": "string", "enum": CONFOUNDER_FLAGS}},
                },
                "required": ["label", "reason", "flags"],
                "additionalProperties": false,
            }),
        }),
        sample,
        tools: Vec::new(),
        tool_choice: None,
        replay_key: None,
    }
}

/// The split question about one candidate whose keyword evidence is mixed.
#[must_use]
pub fn split_request(
    candidate: &Candidate,
    evidence: &[String],
    model: &str,
    lm: &LmSettings,
) -> ChatRequest {
    let evidence = if evidence.is_empty() {
        "none".to_string()
    } else {
        evidence.join(", ")
    };
    let user = format!(
        "Repository: {}\nPlatform keywords found: {evidence}\n\n## Issue\n{}\n\n## Fix\n```diff\n{}\n```\n\n\
         ## Tests\n```diff\n{}\n```\n",
        candidate.repo,
        cut(&candidate.problem_statement, STATEMENT_CHARS),
        cut(&candidate.patch, PATCH_CHARS),
        cut(&candidate.test_patch, PATCH_CHARS),
    );
    ChatRequest {
        model: model.to_string(),
        messages: vec![ChatMessage::system(SPLIT_SYSTEM), ChatMessage::user(user)],
        temperature: lm.temperature,
        max_tokens: u32::try_from(lm.max_tokens).unwrap_or(1024),
        schema: Some(AnswerSchema {
            name: "kiln_platform".into(),
            schema: json!({
                "type": "object",
                "properties": {
                    "platform": {"type": "string", "enum": ["linux", "windows", "macos"]},
                    "reason": {"type": "string"},
                },
                "required": ["platform", "reason"],
                "additionalProperties": false,
            }),
        }),
        sample: 0,
        tools: Vec::new(),
        tool_choice: None,
        replay_key: None,
    }
}

/// A filter answer, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterAnswer {
    /// One of [`FILTER_LABELS`].
    pub label: String,
    /// The model's reason.
    pub reason: String,
    /// Known confounder flags it raised.
    pub flags: Vec<String>,
}

/// Reads a filter answer; `Err` says why it cannot be used.
///
/// # Errors
/// When the text holds no JSON object or no known label.
pub fn parse_filter_answer(content: &str) -> Result<FilterAnswer, String> {
    let object = json_object(content)?;
    let raw_label = match object.get("label").or_else(|| object.get("class")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err("the answer has no label".into()),
    };
    let label = filter_label(&raw_label)
        .ok_or_else(|| format!("the answer's label \"{raw_label}\" is not one of the classes"))?;
    let reason = object
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    let mut flags: Vec<String> = object
        .get("flags")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(normalise)
                .filter(|f| CONFOUNDER_FLAGS.contains(&f.as_str()))
                .collect()
        })
        .unwrap_or_default();
    flags.sort();
    flags.dedup();
    Ok(FilterAnswer {
        label: label.to_string(),
        reason,
        flags,
    })
}

/// A split answer, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitAnswer {
    /// `linux`, `windows` or `macos`.
    pub platform: String,
    /// The model's reason.
    pub reason: String,
}

/// Reads a split answer; `Err` says why it cannot be used.
///
/// # Errors
/// When the text holds no JSON object or no known platform.
pub fn parse_split_answer(content: &str) -> Result<SplitAnswer, String> {
    let object = json_object(content)?;
    let raw = object
        .get("platform")
        .or_else(|| object.get("os"))
        .and_then(Value::as_str)
        .ok_or("the answer has no platform")?;
    let platform = match normalise(raw).as_str() {
        "linux" | "general" | "any" | "cross-platform" => "linux",
        "windows" | "win32" | "win" => "windows",
        "macos" | "mac" | "osx" | "darwin" => "macos",
        _ => {
            return Err(format!(
                "the answer's platform \"{raw}\" is not linux, windows or macos"
            ));
        }
    };
    Ok(SplitAnswer {
        platform: platform.to_string(),
        reason: object
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

fn filter_label(raw: &str) -> Option<&'static str> {
    Some(match normalise(raw).as_str() {
        "ok" | "4" | "fair" | "good" | "keep" => "ok",
        "vague" | "1" | "too-vague" | "unclear" => "vague",
        "unstated-requirements" | "2" | "unstated" | "tests-need-unstated-requirements" => {
            "unstated-requirements"
        }
        "solution-leak" | "3" | "solution-given" | "solution-given-away" | "leak" => {
            "solution-leak"
        }
        _ => return None,
    })
}

/// Lowercase, with spaces and underscores as dashes: `Too Vague` → `too-vague`.
fn normalise(text: &str) -> String {
    text.trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '.')
        .to_ascii_lowercase()
        .replace([' ', '_'], "-")
}

/// The JSON object in an answer: the whole text, or the text inside code fences or after a
/// reasoning block, or the span from the first `{` to the last `}`.
fn json_object(content: &str) -> Result<serde_json::Map<String, Value>, String> {
    let mut text = content.trim();
    if let Some(end) = text.find("</think>") {
        text = text[end + "</think>".len()..].trim();
    }
    let candidates = [
        Some(text),
        text.find('{')
            .zip(text.rfind('}'))
            .filter(|(start, end)| start < end)
            .map(|(start, end)| &text[start..=end]),
    ];
    for candidate in candidates.into_iter().flatten() {
        if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(candidate) {
            return Ok(object);
        }
    }
    if text.is_empty() {
        Err("the answer is empty".into())
    } else {
        Err(format!(
            "the answer holds no JSON object: {}",
            cut(text, 120).replace('\n', " ")
        ))
    }
}

/// The first `n` characters of `text`, with a note of how much was cut.
fn cut(text: &str, n: usize) -> String {
    let total = text.chars().count();
    if total <= n {
        return text.to_string();
    }
    let head: String = text.chars().take(n).collect();
    format!("{head}\n[... {} more characters cut ...]", total - n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_through_fences_prose_and_reasoning() {
        let plain = parse_filter_answer(r#"{"label": "ok", "reason": "clear", "flags": []}"#);
        assert_eq!(plain.map(|a| a.label), Ok("ok".to_string()));
        let fenced = parse_filter_answer(
            "Here is my verdict:\n```json\n{\"label\": \"Too Vague\", \"reason\": \"no expected output\", \"flags\": [\"Network Access\", \"bogus\"]}\n```",
        )
        .unwrap();
        assert_eq!(fenced.label, "vague");
        assert_eq!(fenced.flags, ["network-access"]);
        let thinking = parse_filter_answer(
            "<think>The tests assert {\"x\"}...</think>\n{\"label\": 3, \"reason\": \"the issue has the patch\"}",
        )
        .unwrap();
        assert_eq!(thinking.label, "solution-leak");
        assert!(thinking.flags.is_empty());
    }

    #[test]
    fn unusable_answers_say_why() {
        assert_eq!(
            parse_filter_answer("I cannot judge this."),
            Err("the answer holds no JSON object: I cannot judge this.".to_string())
        );
        assert_eq!(
            parse_filter_answer("  "),
            Err("the answer is empty".to_string())
        );
        assert!(
            parse_filter_answer(r#"{"label": "maybe"}"#)
                .is_err_and(|e| e.contains("\"maybe\" is not one of the classes"))
        );
        assert_eq!(
            parse_split_answer(r#"{"platform": "Windows", "reason": "registry"}"#)
                .map(|a| a.platform),
            Ok("windows".to_string())
        );
        assert!(parse_split_answer(r#"{"platform": "bsd"}"#).is_err());
    }

    #[test]
    fn long_texts_are_cut_with_a_note() {
        let text = "x".repeat(30);
        assert_eq!(cut(&text, 40), text);
        assert_eq!(
            cut(&text, 10),
            format!("{}\n[... 20 more characters cut ...]", "x".repeat(10))
        );
    }
}
