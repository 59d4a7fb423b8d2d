//! The wall time of each phase of one launch, for its log.

use std::time::Instant;

/// Wall time per phase of one launch, written as the last line of `launch.log` so that the
/// time kiln adds around the repository's own commands can be read off (`clone 0.08, ...`).
pub(super) struct Phases {
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub(super) fn new() -> Self {
        Self {
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    pub(super) fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done
            .push((name, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    /// Appends the phases to the log at `path`.
    pub(super) fn write(&self, path: &std::path::Path) {
        use std::io::Write as _;
        let list: Vec<String> = self
            .done
            .iter()
            .map(|(name, secs)| format!("{name} {secs:.2}"))
            .collect();
        if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open(path) {
            let _ = writeln!(log, "# launch phases (s): {}", list.join(", "));
        }
    }
}
