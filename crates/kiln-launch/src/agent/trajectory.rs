//! `agent.jsonl`: the agent's trajectory in the launch's logs.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use kiln_core::lm::ChatAnswer;
use serde_json::json;

use super::spent::Spent;

/// `agent.jsonl`: one line per turn and a last line with the totals.
pub(super) struct Trajectory {
    file: Option<std::fs::File>,
}

impl Trajectory {
    pub(super) fn open(path: &Path) -> Self {
        Self {
            file: std::fs::File::create(path).ok(),
        }
    }

    pub(super) fn write(&mut self, value: &serde_json::Value) {
        if let Some(file) = &mut self.file {
            let _ = writeln!(file, "{value}");
        }
    }

    pub(super) fn turn(
        &mut self,
        spent: &Spent,
        answer: &ChatAnswer,
        content: &str,
        actions: &[serde_json::Value],
        asked: Instant,
    ) {
        self.write(&json!({
            "turn": spent.turns,
            "replayed": answer.replayed,
            "prompt_tokens": answer.usage.map(|u| u.prompt_tokens),
            "completion_tokens": answer.usage.map(|u| u.completion_tokens),
            "cost_usd": answer.cost_usd,
            "content": content,
            "actions": actions,
            "seconds": asked.elapsed().as_secs_f64(),
        }));
    }
}
