//! Draws progress events: bars on a terminal, plain lines otherwise, JSON lines with `--json`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kiln_core::{Event, Reporter};

/// How events are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Progress bars (stderr is a terminal).
    Bars,
    /// One line per finished item and stage, on stderr.
    Lines,
    /// One JSON object per event, on stderr.
    Json,
    /// Nothing.
    Quiet,
}

impl Mode {
    /// Bars on a terminal, lines otherwise; JSON when asked.
    pub fn detect(json: bool, quiet: bool) -> Self {
        if quiet {
            Self::Quiet
        } else if json {
            Self::Json
        } else if std::io::stderr().is_terminal() {
            Self::Bars
        } else {
            Self::Lines
        }
    }
}

/// The CLI's reporter.
pub struct Progress {
    mode: Mode,
    multi: MultiProgress,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
}

impl Progress {
    /// A reporter in `mode`.
    pub fn new(mode: Mode) -> Self {
        let multi = MultiProgress::with_draw_target(if mode == Mode::Bars {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        Self {
            mode,
            multi,
            bars: Mutex::new(BTreeMap::new()),
        }
    }

    fn line(&self, text: &str) {
        match self.mode {
            Mode::Bars => {
                let _ = self.multi.println(text);
            }
            Mode::Lines => {
                let _ = writeln!(std::io::stderr(), "{text}");
            }
            Mode::Json | Mode::Quiet => {}
        }
    }

    fn bar(&self, stage: &str) -> Option<ProgressBar> {
        self.bars
            .lock()
            .ok()
            .and_then(|bars| bars.get(stage).cloned())
    }
}

fn json(event: &Event) -> serde_json::Value {
    use serde_json::json;
    match event {
        Event::StageStarted { stage, total, done } => {
            json!({"event": "stage-started", "stage": stage, "total": total, "done": done})
        }
        Event::ItemStarted { stage, item } => {
            json!({"event": "item-started", "stage": stage, "item": item})
        }
        Event::ItemStep { stage, item, step } => {
            json!({"event": "item-step", "stage": stage, "item": item, "step": step})
        }
        Event::ItemFinished {
            stage,
            item,
            outcome,
            seconds,
        } => {
            json!({"event": "item-finished", "stage": stage, "item": item, "outcome": outcome, "seconds": seconds})
        }
        Event::StageFinished {
            stage,
            rows,
            seconds,
        } => json!({"event": "stage-finished", "stage": stage, "rows": rows, "seconds": seconds}),
        Event::Note { message } => json!({"event": "note", "message": message}),
    }
}

impl Reporter for Progress {
    fn report(&self, event: Event) {
        tracing::debug!(?event, "progress");
        match self.mode {
            Mode::Quiet => return,
            Mode::Json => {
                let _ = writeln!(std::io::stderr(), "{}", json(&event));
                return;
            }
            Mode::Bars | Mode::Lines => {}
        }
        match event {
            Event::StageStarted { stage, total, done } => {
                if self.mode == Mode::Bars {
                    let bar = self.multi.add(ProgressBar::new(total));
                    bar.set_style(
                        ProgressStyle::with_template(
                            "{prefix:>9.bold} [{bar:30}] {pos}/{len} {elapsed:>4} {wide_msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                    );
                    bar.set_prefix(stage.clone());
                    bar.set_position(done);
                    bar.enable_steady_tick(std::time::Duration::from_millis(200));
                    if let Ok(mut bars) = self.bars.lock() {
                        bars.insert(stage, bar);
                    }
                } else if total > 0 {
                    self.line(&format!("[{stage}] {total} item(s), {done} already done"));
                }
            }
            Event::ItemStarted { stage, item } => {
                if let Some(bar) = self.bar(&stage) {
                    bar.set_message(format!("{item}: starting"));
                }
            }
            Event::ItemStep { stage, item, step } => {
                if let Some(bar) = self.bar(&stage) {
                    bar.set_message(format!("{item}: {step}"));
                }
            }
            Event::ItemFinished {
                stage,
                item,
                outcome,
                seconds,
            } => {
                if let Some(bar) = self.bar(&stage) {
                    bar.inc(1);
                }
                let outcome = crate::paint::outcome(crate::paint::Stream::Stderr, &outcome);
                self.line(&format!("[{stage}] {item}: {outcome} ({seconds:.1}s)"));
            }
            Event::StageFinished {
                stage,
                rows,
                seconds,
            } => {
                if let Some(bar) = self.bar(&stage) {
                    bar.finish_and_clear();
                }
                self.line(&format!("[{stage}] done: {rows} row(s) in {seconds:.1}s"));
            }
            Event::Note { message } => self.line(&format!("note: {message}")),
        }
    }
}
