//! The LM judge (`judge = "lm"`): votes, the majority, and the heuristic judge where no usable
//! answer comes.

use std::collections::BTreeMap;

use kiln_core::config::FilterSettings;
use kiln_schema::{Candidate, Verdict};

use crate::asker::{Asked, Asker};
use crate::error::Error;
use crate::heuristic::{heuristic_verdict, structural_verdict};
use crate::prompts::{FILTER_LABELS, FilterAnswer, filter_request, parse_filter_answer};
use crate::store::StoredAnswer;

/// Tokens and dollars of the answers behind one row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RowCost {
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
}

impl RowCost {
    /// Adds what a record reported; unknown figures stay unknown only while nothing is known.
    pub(crate) fn add(&mut self, record: &StoredAnswer) {
        let add = |total: &mut Option<i64>, value: Option<u64>| {
            if let Some(value) = value {
                *total = Some(total.unwrap_or(0) + i64::try_from(value).unwrap_or(i64::MAX));
            }
        };
        add(&mut self.prompt_tokens, record.prompt_tokens);
        add(&mut self.completion_tokens, record.completion_tokens);
        if let Some(cost) = record.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
    }
}

/// Why an answer that came cannot be used, if it cannot.
pub(crate) fn unusable<T>(
    record: &StoredAnswer,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, String> {
    if let Some(refusal) = &record.refusal {
        return Err(format!("the model refused: {refusal}"));
    }
    let Some(content) = &record.content else {
        return Err("the answer has no content".into());
    };
    parse(content).map_err(|why| {
        if record.finish_reason.as_deref() == Some("length") {
            format!("{why} (the answer was cut off at max_tokens)")
        } else {
            why
        }
    })
}

/// Judges one candidate with the LM: `settings.votes` answers from `settings.models` in turn,
/// the majority label (ties go to `ok`, as "keep when unsure" asks, then to the milder label),
/// the flags at least half the usable votes raise. Candidates that are no task at all get the
/// heuristic's structural verdict without a question; where no usable answer comes (malformed,
/// refused, failed, over budget), the heuristic judge decides and the row says why.
///
/// # Errors
/// Only when the run's answer files cannot be read or written.
pub async fn lm_verdict(
    candidate: &Candidate,
    settings: &FilterSettings,
    asker: &Asker,
) -> Result<Verdict, Error> {
    if let Some(verdict) = structural_verdict(candidate, settings) {
        return Ok(verdict);
    }
    let (Some(lm), false) = (&settings.lm, settings.models.is_empty()) else {
        return Ok(heuristic_verdict(candidate, settings));
    };
    let mut votes = Vec::new();
    let mut raw_answers = Vec::new();
    let mut answer_keys = Vec::new();
    let mut problems = Vec::new();
    let mut usable: Vec<(String, FilterAnswer)> = Vec::new();
    let mut cost = RowCost::default();
    let mut budget_note = None;
    for sample in 0..u32::try_from(settings.votes).unwrap_or(1) {
        let model = &settings.models[sample as usize % settings.models.len()];
        let request = filter_request(candidate, model, lm, sample);
        let asked = asker.ask(candidate.instance_id.as_str(), &request).await?;
        if let Asked::OverBudget { spent, limit } = asked {
            budget_note = Some(format!(
                "the run's budget of ${limit} was reached (${spent:.4} spent), so {} of {} votes were not asked",
                settings.votes - i64::from(sample),
                settings.votes
            ));
            break;
        }
        let Some(record) = asked.record() else {
            continue;
        };
        cost.add(record);
        answer_keys.push(record.key.clone());
        raw_answers.push(row_copy(
            record.content.as_deref().unwrap_or_default(),
            &record.key,
        ));
        let outcome = match &asked {
            Asked::Failed { answer } => Err(answer.error.clone().unwrap_or_default()),
            _ => unusable(record, parse_filter_answer),
        };
        match outcome {
            Ok(answer) => {
                votes.push(format!("{model}: {}", answer.label));
                usable.push((model.clone(), answer));
            }
            Err(why) => {
                votes.push(format!("{model}: unusable: {why}"));
                problems.push(format!("{model}: {why}"));
            }
        }
    }
    let mut verdict = if usable.is_empty() {
        let mut verdict = heuristic_verdict(candidate, settings);
        let mut why: Vec<String> = Vec::new();
        if !problems.is_empty() {
            why.push(format!("no usable LM answer ({})", problems.join("; ")));
        }
        why.extend(budget_note);
        verdict.fallback = Some(why.join("; "));
        verdict
    } else {
        let mut verdict = majority(candidate, settings, &usable);
        if let Some(note) = budget_note {
            verdict.reason = format!("{} ({note})", verdict.reason);
        }
        verdict
    };
    verdict.prompt_tokens = cost.prompt_tokens;
    verdict.completion_tokens = cost.completion_tokens;
    verdict.cost_usd = cost.cost_usd;
    verdict.votes = votes;
    verdict.raw_answers = raw_answers;
    verdict.answer_keys = answer_keys;
    Ok(verdict)
}

/// The verdict of the usable votes.
fn majority(
    candidate: &Candidate,
    settings: &FilterSettings,
    usable: &[(String, FilterAnswer)],
) -> Verdict {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut flag_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, answer) in usable {
        *counts.entry(answer.label.as_str()).or_default() += 1;
        for flag in &answer.flags {
            *flag_counts.entry(flag.as_str()).or_default() += 1;
        }
    }
    let best = counts.values().copied().max().unwrap_or(0);
    let label = FILTER_LABELS
        .iter()
        .copied()
        .find(|l| counts.get(l) == Some(&best))
        .unwrap_or("ok");
    let flags: Vec<String> = flag_counts
        .iter()
        .filter(|(_, n)| **n * 2 >= usable.len())
        .map(|(f, _)| (*f).to_string())
        .collect();
    let mut reason = usable
        .iter()
        .find(|(_, a)| a.label == label)
        .map(|(_, a)| a.reason.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| format!("the LM judged the task {label}"));
    if usable.len() > 1 {
        let tally: Vec<String> = counts.iter().map(|(l, n)| format!("{l} {n}")).collect();
        reason = format!("{reason} (votes: {})", tally.join(", "));
    }
    let mut models: Vec<&str> = usable.iter().map(|(m, _)| m.as_str()).collect();
    models.dedup();
    models.sort_unstable();
    models.dedup();
    let dropped_for: Vec<&String> = flags
        .iter()
        .filter(|f| settings.drop_flags.contains(f))
        .collect();
    let (keep, label) = if label == "ok" && !dropped_for.is_empty() {
        let names: Vec<&str> = dropped_for.iter().map(|f| f.as_str()).collect();
        reason = format!("flagged {} (drop_flags); {reason}", names.join(", "));
        (false, "flagged")
    } else {
        (label == "ok", label)
    };
    Verdict {
        instance_id: candidate.instance_id.clone(),
        keep,
        label: label.to_string(),
        reason,
        judge: models.join("+"),
        prompt_tokens: None,
        completion_tokens: None,
        cost_usd: None,
        flags,
        votes: Vec::new(),
        raw_answers: Vec::new(),
        answer_keys: Vec::new(),
        fallback: None,
    }
}

/// The most of an answer's text a row keeps; the whole answer stays in the run's answer store.
pub const ROW_ANSWER_CHARS: usize = 16 * 1024;

/// An answer's text as a row keeps it: whole up to [`ROW_ANSWER_CHARS`], else cut there with a
/// note of the cut and of where the whole answer is (`lm/answers/<key>.json`).
#[must_use]
pub fn row_copy(content: &str, key: &str) -> String {
    match content.char_indices().nth(ROW_ANSWER_CHARS) {
        None => content.to_string(),
        Some((at, _)) => format!(
            "{}\n[kiln: cut at {ROW_ANSWER_CHARS} of {} characters; the whole answer is lm/answers/{key}.json]",
            &content[..at],
            content.chars().count()
        ),
    }
}

#[cfg(test)]
mod row_copy_tests {
    use super::*;

    #[test]
    fn long_answers_are_cut_in_rows_with_a_note() {
        assert_eq!(row_copy("short", "k"), "short");
        let long = "é".repeat(ROW_ANSWER_CHARS + 10);
        let kept = row_copy(&long, "abc");
        assert!(kept.starts_with(&"é".repeat(ROW_ANSWER_CHARS)));
        assert!(kept.ends_with(&format!(
            "[kiln: cut at {ROW_ANSWER_CHARS} of {} characters; the whole answer is lm/answers/abc.json]",
            ROW_ANSWER_CHARS + 10
        )));
    }
}
