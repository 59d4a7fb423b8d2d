//! [`Asker`]: a stage's way to the LM, with replay, a budget and accounting around it.
//!
//! Every request is keyed by [`ChatRequest::key`]. An answer stored under the key in the run
//! is replayed instead of asked (unless the stage was forced), so a re-run with the same config
//! costs nothing and gives the same verdicts. Before a request is sent, its worst-case cost is
//! reserved against the run's budget: prompt tokens bounded by half the prompt's bytes (no
//! tokenizer kiln knows of packs fewer than two bytes into a token on ordinary text and code)
//! plus `max_tokens` completion tokens. A request that could take the run past
//! `max_cost_usd` is not sent at all.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kiln_core::config::{LmSettings, Price};
use kiln_core::lm::{ChatAnswer, ChatRequest, LanguageModel, LmError, Usage};

use crate::error::Error;
use crate::store::{ANSWER_FORMAT, AnswerStore, Spent, StoredAnswer};

/// What asking gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// The endpoint answered (now or in an earlier run); the content may still be unusable.
    Answered {
        /// The record, as stored.
        answer: StoredAnswer,
        /// Whether it was replayed from the run instead of asked.
        replayed: bool,
    },
    /// No answer came; the record is stored for the audit.
    Failed {
        /// The record, with `error` set.
        answer: StoredAnswer,
    },
    /// The request was not sent: it could have taken the run past its budget.
    OverBudget {
        /// Dollars the run had spent.
        spent: f64,
        /// The budget.
        limit: f64,
    },
}

impl Asked {
    /// The stored record, when there is one.
    #[must_use]
    pub fn record(&self) -> Option<&StoredAnswer> {
        match self {
            Self::Answered { answer, .. } | Self::Failed { answer } => Some(answer),
            Self::OverBudget { .. } => None,
        }
    }
}

/// What one stage's asking cost and did, for its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AskStats {
    /// HTTP requests sent (retries included).
    pub requests: u64,
    /// Answers that came from the endpoint.
    pub answers: u64,
    /// Answers replayed from the run.
    pub replayed: u64,
    /// Questions that got no answer.
    pub failed: u64,
    /// Questions not sent for the budget.
    pub over_budget: u64,
    /// Prompt tokens paid.
    pub prompt_tokens: u64,
    /// Completion tokens paid.
    pub completion_tokens: u64,
    /// Dollars paid.
    pub cost_usd: f64,
}

impl AskStats {
    /// Adds these figures to a stage's stats (`lm.requests`, `lm.cost_usd`, ...).
    pub fn add_to(&self, stats: &mut BTreeMap<String, f64>) {
        for (name, value) in [
            ("lm.requests", self.requests as f64),
            ("lm.answers", self.answers as f64),
            ("lm.replayed", self.replayed as f64),
            ("lm.failed", self.failed as f64),
            ("lm.over_budget", self.over_budget as f64),
            ("lm.prompt_tokens", self.prompt_tokens as f64),
            ("lm.completion_tokens", self.completion_tokens as f64),
            ("lm.cost_usd", self.cost_usd),
        ] {
            *stats.entry(name.to_string()).or_default() += value;
        }
    }
}

#[derive(Debug, Default)]
struct Ledger {
    spent: Spent,
    reserved: f64,
}

/// Asks the LM for one stage of one run.
pub struct Asker {
    model: Arc<dyn LanguageModel>,
    store: AnswerStore,
    stage: String,
    prices: BTreeMap<String, Price>,
    budget: Option<f64>,
    replay: bool,
    ledger: Mutex<Ledger>,
    stats: Mutex<AskStats>,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("endpoint", &self.model.endpoint())
            .field("stage", &self.stage)
            .field("replay", &self.replay)
            .finish_non_exhaustive()
    }
}

impl Asker {
    /// An asker for `stage`, storing answers in `store`. `replay = false` (a forced stage)
    /// asks again even where an answer is stored, and replaces it.
    ///
    /// # Errors
    /// When what the run has spent cannot be read.
    pub fn new(
        model: Arc<dyn LanguageModel>,
        store: AnswerStore,
        stage: &str,
        settings: &LmSettings,
        replay: bool,
    ) -> Result<Self, Error> {
        let spent = store.spent()?;
        Ok(Self {
            model,
            store,
            stage: stage.to_string(),
            prices: settings.prices.clone(),
            budget: settings.max_cost_usd,
            replay,
            ledger: Mutex::new(Ledger {
                spent,
                reserved: 0.0,
            }),
            stats: Mutex::new(AskStats::default()),
        })
    }

    /// What this asker did so far.
    #[must_use]
    pub fn stats(&self) -> AskStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    /// The endpoint asked.
    #[must_use]
    pub fn endpoint(&self) -> String {
        self.model.endpoint()
    }

    fn count(&self, update: impl FnOnce(&mut AskStats)) {
        if let Ok(mut stats) = self.stats.lock() {
            update(&mut stats);
        }
    }

    /// Asks one question about `instance_id`, or replays the stored answer.
    ///
    /// # Errors
    /// Only when the run's files cannot be read or written; an endpoint that fails is an
    /// [`Asked::Failed`].
    pub async fn ask(&self, instance_id: &str, request: &ChatRequest) -> Result<Asked, Error> {
        let key = request.key();
        if self.replay
            && let Some(stored) = self.store.load(&key)?
            && stored.error.is_none()
        {
            self.count(|s| s.replayed += 1);
            return Ok(Asked::Answered {
                answer: stored,
                replayed: true,
            });
        }
        let price = self.prices.get(&request.model).copied();
        let reserved = match self.reserve(request, price) {
            Ok(reserved) => reserved,
            Err((spent, limit)) => {
                self.count(|s| s.over_budget += 1);
                return Ok(Asked::OverBudget { spent, limit });
            }
        };
        let result = self.model.chat(request).await;
        let (attempts, usage) = match &result {
            Ok(answer) => (answer.attempts, answer.usage),
            Err(error) => (error.attempts(), error.usage()),
        };
        let cost = match (price, usage) {
            (Some(price), Some(usage)) => {
                Some(price.cost(usage.prompt_tokens, usage.completion_tokens))
            }
            (Some(_), None) => Some(0.0),
            (None, _) => None,
        };
        self.settle(reserved, attempts, usage, cost)?;
        let record = self.record(instance_id, request, &key, &result, cost);
        self.store.save(&record)?;
        Ok(match result {
            Ok(_) => {
                self.count(|s| s.answers += 1);
                Asked::Answered {
                    answer: record,
                    replayed: false,
                }
            }
            Err(_) => {
                self.count(|s| s.failed += 1);
                Asked::Failed { answer: record }
            }
        })
    }

    /// Reserves the worst-case cost of a request against the budget; `Err((spent, limit))`
    /// when it does not fit.
    fn reserve(&self, request: &ChatRequest, price: Option<Price>) -> Result<f64, (f64, f64)> {
        let Some(limit) = self.budget else {
            return Ok(0.0);
        };
        // The config check makes every budgeted model priced; without a price nothing can be
        // counted, so nothing is sent.
        let Some(price) = price else {
            return Err((0.0, limit));
        };
        let prompt_bound = request.prompt_bytes() as u64 / 2 + 16;
        let estimate = price.cost(prompt_bound, u64::from(request.max_tokens));
        let Ok(mut ledger) = self.ledger.lock() else {
            return Err((0.0, limit));
        };
        if ledger.spent.cost_usd + ledger.reserved + estimate > limit {
            return Err((ledger.spent.cost_usd, limit));
        }
        ledger.reserved += estimate;
        Ok(estimate)
    }

    /// Books what a request cost, in the run's ledger and the stage's figures.
    fn settle(
        &self,
        reserved: f64,
        attempts: u32,
        usage: Option<Usage>,
        cost: Option<f64>,
    ) -> Result<(), Error> {
        let usage = usage.unwrap_or_default();
        let cost = cost.unwrap_or(0.0);
        self.count(|s| {
            s.requests += u64::from(attempts);
            s.prompt_tokens += usage.prompt_tokens;
            s.completion_tokens += usage.completion_tokens;
            s.cost_usd += cost;
        });
        let Ok(mut ledger) = self.ledger.lock() else {
            return Ok(());
        };
        ledger.reserved = (ledger.reserved - reserved).max(0.0);
        ledger.spent.requests += u64::from(attempts);
        ledger.spent.prompt_tokens += usage.prompt_tokens;
        ledger.spent.completion_tokens += usage.completion_tokens;
        ledger.spent.cost_usd += cost;
        // Written under the lock: two answers settling at once must not write their totals in
        // the wrong order and lose one.
        self.store.save_spent(&ledger.spent)
    }

    fn record(
        &self,
        instance_id: &str,
        request: &ChatRequest,
        key: &str,
        result: &Result<ChatAnswer, LmError>,
        cost: Option<f64>,
    ) -> StoredAnswer {
        let mut record = StoredAnswer {
            format: ANSWER_FORMAT,
            key: key.to_string(),
            stage: self.stage.clone(),
            instance_id: instance_id.to_string(),
            endpoint: self.model.endpoint(),
            model: request.model.clone(),
            asked_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            attempts: 0,
            structured: false,
            content: None,
            refusal: None,
            tool_calls: Vec::new(),
            finish_reason: None,
            response_model: None,
            response_id: None,
            prompt_tokens: None,
            completion_tokens: None,
            cost_usd: cost,
            error: None,
            request: serde_json::to_value(request).unwrap_or_default(),
            response: serde_json::Value::Null,
        };
        match result {
            Ok(answer) => {
                record.attempts = answer.attempts;
                record.structured = answer.structured;
                record.content.clone_from(&answer.content);
                record.refusal.clone_from(&answer.refusal);
                record.tool_calls.clone_from(&answer.tool_calls);
                record.finish_reason.clone_from(&answer.finish_reason);
                record.response_model.clone_from(&answer.model);
                record.response_id.clone_from(&answer.id);
                record.prompt_tokens = answer.usage.map(|u| u.prompt_tokens);
                record.completion_tokens = answer.usage.map(|u| u.completion_tokens);
                record.request = answer.request_body.clone();
                record.response = answer.response_body.clone();
            }
            Err(error) => {
                record.attempts = error.attempts();
                record.prompt_tokens = error.usage().map(|u| u.prompt_tokens);
                record.completion_tokens = error.usage().map(|u| u.completion_tokens);
                record.error = Some(error.to_string());
            }
        }
        record
    }
}

/// An [`Asker`] seen as a [`LanguageModel`] for the questions about one instance: answers are
/// replayed from the run when it holds them, asked and stored otherwise, within the run's
/// budget (a request that could take the run past it is an [`LmError::OverBudget`]).
pub struct AskingModel {
    asker: Arc<Asker>,
    instance_id: String,
}

impl AskingModel {
    /// The asker's model for questions about `instance_id`.
    #[must_use]
    pub fn new(asker: Arc<Asker>, instance_id: &str) -> Self {
        Self {
            asker,
            instance_id: instance_id.to_string(),
        }
    }
}

#[async_trait::async_trait]
impl LanguageModel for AskingModel {
    fn endpoint(&self) -> String {
        self.asker.model.endpoint()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatAnswer, LmError> {
        let asked = self
            .asker
            .ask(&self.instance_id, request)
            .await
            .map_err(|e| LmError::Setup(format!("the run's answer store: {e}")))?;
        match asked {
            Asked::Answered { answer, replayed } => Ok(ChatAnswer {
                id: answer.response_id,
                model: answer.response_model,
                content: answer.content,
                refusal: answer.refusal,
                tool_calls: answer.tool_calls,
                finish_reason: answer.finish_reason,
                usage: match (answer.prompt_tokens, answer.completion_tokens) {
                    (None, None) => None,
                    (prompt, completion) => Some(Usage {
                        prompt_tokens: prompt.unwrap_or(0),
                        completion_tokens: completion.unwrap_or(0),
                    }),
                },
                structured: answer.structured,
                attempts: answer.attempts,
                request_body: answer.request,
                response_body: answer.response,
                cost_usd: answer.cost_usd,
                replayed,
            }),
            Asked::Failed { answer } => Err(LmError::Recorded {
                endpoint: answer.endpoint,
                message: answer.error.unwrap_or_default(),
                attempts: answer.attempts,
            }),
            Asked::OverBudget { spent, limit } => Err(LmError::OverBudget { spent, limit }),
        }
    }
}
