//! What the agent's answers cost, and which of its budgets (turns, tokens, dollars, time) is
//! used up.

use std::time::Duration;

use kiln_core::config::AgentSettings;
use kiln_core::lm::ChatAnswer;

/// What the agent's answers cost.
#[derive(Default)]
pub(super) struct Spent {
    pub(super) turns: u32,
    pub(super) tokens: u64,
    pub(super) cost_usd: f64,
    pub(super) replayed: u32,
}

impl Spent {
    pub(super) fn add(&mut self, answer: &ChatAnswer) {
        self.turns += 1;
        if let Some(usage) = answer.usage {
            self.tokens += usage.prompt_tokens + usage.completion_tokens;
        }
        if answer.replayed {
            self.replayed += 1;
        } else {
            self.cost_usd += answer.cost_usd.unwrap_or(0.0);
        }
    }

    /// Which budget is used up, if any.
    pub(super) fn exhausted(&self, settings: &AgentSettings, elapsed: Duration) -> Option<String> {
        let turns = u64::from(self.turns);
        if turns >= u64::try_from(settings.max_steps).unwrap_or(0) {
            return Some(format!(
                "it used all {} turns (agent_max_steps)",
                settings.max_steps
            ));
        }
        if self.tokens >= u64::try_from(settings.max_tokens).unwrap_or(0) {
            return Some(format!(
                "it used {} tokens, the limit is {} (agent_max_tokens)",
                self.tokens, settings.max_tokens
            ));
        }
        if self.cost_usd >= settings.max_cost_usd {
            return Some(format!(
                "it spent ${:.4}, the limit is ${:.4} (agent_max_cost_usd)",
                self.cost_usd, settings.max_cost_usd
            ));
        }
        if elapsed >= settings.timeout {
            return Some(format!(
                "it ran {:.0}s, the limit is {:.0}s (agent_timeout)",
                elapsed.as_secs_f64(),
                settings.timeout.as_secs_f64()
            ));
        }
        None
    }

    /// The line that tells the model what is left.
    pub(super) fn left(&self, settings: &AgentSettings, elapsed: Duration) -> String {
        format!(
            "Left: {} turns, {} tokens, {:.0} minutes.",
            u64::try_from(settings.max_steps)
                .unwrap_or(0)
                .saturating_sub(u64::from(self.turns)),
            u64::try_from(settings.max_tokens)
                .unwrap_or(0)
                .saturating_sub(self.tokens),
            settings.timeout.saturating_sub(elapsed).as_secs_f64() / 60.0
        )
    }
}
