//! The `[lm]` table: the OpenAI-compatible endpoint the filter and split stages may ask.
//!
//! The API key itself never enters the config: `api_key_env` names the environment variable
//! that holds it, so the config, its snapshot in `run.json` and the settings hashes stay free
//! of secrets.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::read::{Compiler, Keys, Value, cut};

/// Price of a model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    /// Per million prompt tokens.
    pub prompt: f64,
    /// Per million completion tokens.
    pub completion: f64,
}

impl Price {
    /// Cost in US dollars of the given token counts.
    #[must_use]
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> f64 {
        (prompt_tokens as f64 * self.prompt + completion_tokens as f64 * self.completion) / 1e6
    }
}

/// Settings of the `[lm]` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LmSettings {
    /// Base URL of the API, up to and including `/v1` (`https://api.openai.com/v1`,
    /// `http://localhost:8000/v1`); requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    /// Model asked when a stage names none.
    pub model: String,
    /// Name of the environment variable holding the API key (unset or empty: no key is sent,
    /// as local servers expect).
    pub api_key_env: String,
    /// Timeout of one HTTP request.
    pub timeout: Duration,
    /// Retries after a 429, a 5xx, a timeout or a dropped connection.
    pub retries: i64,
    /// Requests in flight at once, across the stage.
    pub max_in_flight: i64,
    /// Sampling temperature.
    pub temperature: f64,
    /// Upper bound on completion tokens per answer.
    pub max_tokens: i64,
    /// Ask for `response_format` `json_schema`; the client falls back to plain JSON prompting
    /// by itself when the endpoint refuses it.
    pub json_schema: bool,
    /// Budget of one run in US dollars: no request is sent that could take the run past it.
    pub max_cost_usd: Option<f64>,
    /// Prices by model name.
    pub prices: BTreeMap<String, Price>,
}

impl LmSettings {
    /// The price of `model`, if the config gives one.
    #[must_use]
    pub fn price(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }
}

/// Keys of the `[lm]` table.
const LM_KEYS: &[&str] = &[
    "base_url",
    "model",
    "api_key_env",
    "timeout",
    "retries",
    "max_in_flight",
    "temperature",
    "max_tokens",
    "json_schema",
    "max_cost_usd",
    "prices",
];

impl Compiler<'_> {
    /// Compiles `[lm]`; `Err(())` when it had errors (already reported), `Ok(None)` when absent.
    pub(super) fn lm(&mut self, value: Option<&Value<'_>>) -> Result<Option<LmSettings>, ()> {
        let Some(value) = value else {
            return Ok(None);
        };
        let table = self.table(value, "lm").ok_or(())?;
        let mut keys = Keys::new(table, "lm", value.span().start);
        if let Some(secret) = keys.get("api_key") {
            // Said apart from the unknown-key message: a key in the config would end up in the
            // run's config snapshot.
            self.error_at(
                secret.span().start,
                "lm.api_key",
                "an API key does not belong in the config; put it in an environment variable \
                 and name that variable in `api_key_env`"
                    .into(),
            );
        }
        let base_url = self.required_string(&mut keys, "base_url");
        if let Ok(url) = &base_url {
            let problem = base_url_problem(url);
            if let Some(problem) = problem {
                let at = keys.get("base_url").map_or(keys.at, |v| v.span().start);
                self.error_at(at, "lm.base_url", problem.into());
            }
        }
        let model = self.required_string(&mut keys, "model");
        let api_key_env = self.string_or(&mut keys, "api_key_env", "OPENAI_API_KEY");
        if let Ok(name) = &api_key_env
            && !is_env_name(name)
        {
            let at = keys.get("api_key_env").map_or(keys.at, |v| v.span().start);
            self.error_at(
                at,
                "lm.api_key_env",
                "must be the name of an environment variable (letters, digits and `_`, not \
                 starting with a digit), not the key itself"
                    .into(),
            );
        }
        let timeout = self.read(&mut keys, "timeout", Duration::from_secs(120), ..);
        let retries = self.read(&mut keys, "retries", 4, 0..=20);
        let max_in_flight = self.read(&mut keys, "max_in_flight", 4, 1..=256);
        let temperature = self.read(&mut keys, "temperature", 0.0, 0.0..=2.0);
        let max_tokens = self.read(&mut keys, "max_tokens", 1024, 16..=1_000_000);
        let json_schema = self.read(&mut keys, "json_schema", true, ..);
        let max_cost_usd = self.read_optional(&mut keys, "max_cost_usd", 0.0..=1e9);
        let prices = self.prices(&mut keys);
        keys.finish(self, LM_KEYS);
        let settings = LmSettings {
            base_url: base_url?.trim_end_matches('/').to_string(),
            model: model?,
            api_key_env: api_key_env?,
            timeout: timeout?,
            retries: retries?,
            max_in_flight: max_in_flight?,
            temperature: temperature?,
            max_tokens: max_tokens?,
            json_schema: json_schema?,
            max_cost_usd: max_cost_usd?,
            prices: prices?,
        };
        Ok(Some(settings))
    }

    fn prices(&mut self, keys: &mut Keys<'_, '_>) -> Result<BTreeMap<String, Price>, ()> {
        let Some(value) = keys.get("prices") else {
            return Ok(BTreeMap::new());
        };
        let table = self.table(value, "lm.prices").ok_or(())?;
        let mut prices = BTreeMap::new();
        let mut ok = true;
        for (model, entry) in table {
            let model = model.get_ref().to_string();
            let key = format!("lm.prices.\"{model}\"");
            let Some(entry_table) = self.table(entry, &key) else {
                ok = false;
                continue;
            };
            let mut entry_keys = Keys::new(entry_table, &key, entry.span().start);
            let prompt = self.read(&mut entry_keys, "prompt", 0.0, 0.0..=1e6);
            let completion = self.read(&mut entry_keys, "completion", 0.0, 0.0..=1e6);
            let named = entry_table
                .iter()
                .filter(|(k, _)| ["prompt", "completion"].contains(&k.get_ref().as_ref()))
                .count();
            if named < 2 {
                self.error_at(
                    entry.span().start,
                    &key,
                    "give both `prompt` and `completion`, in US dollars per million tokens".into(),
                );
                ok = false;
            }
            entry_keys.finish(self, &["prompt", "completion"]);
            match (prompt, completion) {
                (Ok(prompt), Ok(completion)) => {
                    prices.insert(model, Price { prompt, completion });
                }
                _ => ok = false,
            }
        }
        if ok { Ok(prices) } else { Err(()) }
    }

    /// Checks that a stage using the LM can keep the budget: with `max_cost_usd`, every model it
    /// asks needs a price, or its spending could not be counted.
    pub(super) fn check_prices(
        &mut self,
        lm: &LmSettings,
        models: &[String],
        at: usize,
        key: &str,
    ) -> Result<(), ()> {
        if lm.max_cost_usd.is_none() {
            return Ok(());
        }
        let unpriced: Vec<&str> = models
            .iter()
            .filter(|m| lm.price(m).is_none())
            .map(String::as_str)
            .collect();
        if unpriced.is_empty() {
            return Ok(());
        }
        self.error_at(
            at,
            key,
            format!(
                "[lm] sets max_cost_usd, so every model needs a price in [lm.prices]; missing: {}",
                unpriced
                    .iter()
                    .map(|m| cut(m))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        Err(())
    }
}

/// What is wrong with a base URL, if anything.
fn base_url_problem(url: &str) -> Option<&'static str> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Some("must start with http:// or https://");
    };
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Some("names no host");
    }
    if authority.contains('@') {
        return Some(
            "credentials do not belong in the URL; put the key in an environment variable and \
             name it in `api_key_env`",
        );
    }
    None
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
