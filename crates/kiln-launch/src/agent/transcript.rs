//! What the model is sent each turn: the instructions, the hand-over from the rules, the last
//! few turns whole, and a compact log of every action so far with its outcome. The history is
//! windowed so that a long session's prompt stays bounded; the log keeps what the window drops.
//!
//! Each request carries a replay key made of the hand-over's stable part and every action with
//! its outcome code (exit code, refused, rolled back), not the actions' output: a re-run whose
//! commands behave the same replays the stored answers even when their output differs in
//! timings or download progress.

use kiln_core::lm::{ChatMessage, ChatRequest, ToolCall};

/// Turns kept whole in the prompt.
pub(crate) const WINDOW: usize = 8;

/// Bytes of one action's output shown to the model: its head and its tail.
pub(crate) const RESULT_HEAD: usize = 2_000;
pub(crate) const RESULT_TAIL: usize = 5_000;

/// One turn: the model's answer and the results of its calls.
struct Turn {
    answer: ChatMessage,
    results: Vec<ChatMessage>,
}

/// One line of the command log.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    /// What was done (`run apt-get install -y jq`).
    pub(crate) action: String,
    /// How it ended (`exit 0`, `exit 100, rolled back`, `refused`).
    pub(crate) outcome: String,
}

/// The conversation of one agent launch.
pub(crate) struct Transcript {
    system: String,
    handover: String,
    turns: Vec<Turn>,
    log: Vec<Logged>,
    key: String,
}

impl Transcript {
    /// A conversation with `system` instructions and the `handover` text; `key` is the stable
    /// part of the hand-over that starts every replay key.
    pub(crate) fn new(system: String, handover: String, key: String) -> Self {
        Self {
            system,
            handover,
            turns: Vec::new(),
            log: Vec::new(),
            key,
        }
    }

    /// The request for the next turn.
    pub(crate) fn request(&self, template: &ChatRequest, budget_line: &str) -> ChatRequest {
        let mut messages = vec![
            ChatMessage::system(self.system.clone()),
            ChatMessage::user(self.handover.clone()),
        ];
        let first = self.turns.len().saturating_sub(WINDOW);
        for turn in &self.turns[first..] {
            messages.push(turn.answer.clone());
            messages.extend(turn.results.iter().cloned());
        }
        let mut status = String::new();
        if first > 0 {
            status.push_str(&format!(
                "({first} earlier turns are left out; the log below has every action.)\n"
            ));
        }
        if self.log.is_empty() {
            status.push_str("No actions yet.\n");
        } else {
            status.push_str("Actions so far:\n");
            for (n, entry) in self.log.iter().enumerate() {
                status.push_str(&format!(
                    "{}. {} -> {}\n",
                    n + 1,
                    entry.action,
                    entry.outcome
                ));
            }
        }
        status.push_str(budget_line);
        messages.push(ChatMessage::user(status));
        ChatRequest {
            messages,
            replay_key: Some(self.key.clone()),
            ..template.clone()
        }
    }

    /// Adds the model's answer; its calls' results follow with [`Transcript::result`].
    pub(crate) fn answer(&mut self, content: &str, calls: &[ToolCall]) {
        self.turns.push(Turn {
            answer: ChatMessage::assistant(content, calls.to_vec()),
            results: Vec::new(),
        });
        if calls.is_empty() {
            self.note("answered without calling a tool", "told to call one");
        }
    }

    /// Adds the result of call `call_id` of the last answer, and its line in the log.
    pub(crate) fn result(&mut self, call_id: &str, text: &str, logged: Logged) {
        if let Some(turn) = self.turns.last_mut() {
            turn.results.push(ChatMessage::tool(call_id, text));
        }
        self.note(&logged.action, &logged.outcome);
    }

    /// Adds a line to the log (and to the replay key).
    fn note(&mut self, action: &str, outcome: &str) {
        self.key.push_str(&format!("\n{action} -> {outcome}"));
        self.log.push(Logged {
            action: action.to_string(),
            outcome: outcome.to_string(),
        });
    }
}

/// `text` cut to its head and tail, with how much was left out between them.
#[must_use]
pub(crate) fn head_tail(text: &str) -> String {
    if text.len() <= RESULT_HEAD + RESULT_TAIL {
        return text.to_string();
    }
    let mut head_end = RESULT_HEAD;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - RESULT_TAIL;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{}\n[... {} bytes left out ...]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

/// An action for the log: its tool and its main argument, on one line, cut at 160 characters.
#[must_use]
pub(crate) fn one_line(tool: &str, argument: &str) -> String {
    let flat: String = argument
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let cut: String = flat.chars().take(160).collect();
    let ellipsis = if flat.chars().count() > 160 {
        "..."
    } else {
        ""
    };
    format!("{tool} {cut}{ellipsis}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::lm::Role;

    fn template() -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            messages: Vec::new(),
            temperature: 0.0,
            max_tokens: 100,
            schema: None,
            sample: 0,
            tools: Vec::new(),
            tool_choice: None,
            replay_key: None,
        }
    }

    fn call(n: usize) -> ToolCall {
        ToolCall::new(
            format!("call_{n}"),
            "run",
            &serde_json::json!({"command": format!("step {n}")}),
        )
    }

    #[test]
    fn old_turns_leave_the_window_but_stay_in_the_log() {
        let mut transcript = Transcript::new("sys".into(), "hand-over".into(), "k".into());
        for n in 0..WINDOW + 3 {
            transcript.answer("", &[call(n)]);
            transcript.result(
                &format!("call_{n}"),
                &format!("exit 0 after 1.{n}s"),
                Logged {
                    action: one_line("run", &format!("step {n}")),
                    outcome: "exit 0".into(),
                },
            );
        }
        let request = transcript.request(&template(), "Budget: 3 turns left.");
        // system, hand-over, WINDOW turns of two messages, the log.
        assert_eq!(request.messages.len(), 2 + 2 * WINDOW + 1);
        assert_eq!(request.messages[2].role, Role::Assistant);
        assert_eq!(request.messages[2].tool_calls[0].id, "call_3");
        assert_eq!(request.messages[3].tool_call_id.as_deref(), Some("call_3"));
        let log = &request.messages.last().unwrap().content;
        assert!(log.contains("3 earlier turns are left out"), "{log}");
        assert!(log.contains("1. run step 0 -> exit 0"), "{log}");
        assert!(log.ends_with("Budget: 3 turns left."), "{log}");
    }

    #[test]
    fn the_replay_key_follows_actions_and_outcomes_not_output() {
        let run = |output: &str, outcome: &str| {
            let mut transcript = Transcript::new("sys".into(), "hand-over".into(), "k".into());
            transcript.answer("", &[call(0)]);
            transcript.result(
                "call_0",
                output,
                Logged {
                    action: "run step 0".into(),
                    outcome: outcome.into(),
                },
            );
            transcript.request(&template(), "").key()
        };
        assert_eq!(run("took 1.2s", "exit 0"), run("took 3.4s", "exit 0"));
        assert_ne!(run("took 1.2s", "exit 0"), run("took 1.2s", "exit 1"));
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let text = format!("{}{}", "a".repeat(10_000), "b".repeat(10_000));
        let cut = head_tail(&text);
        assert!(cut.starts_with("aaa") && cut.ends_with("bbb"));
        assert!(cut.contains("bytes left out"));
        assert!(cut.len() < RESULT_HEAD + RESULT_TAIL + 100);
        assert_eq!(one_line("run", "a\nb"), "run a b");
    }
}
