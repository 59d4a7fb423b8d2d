//! CPU time an item's containers used, by what the commands were for, from the engine's own
//! accounting (the container's cgroup), never estimated from wall time.
//!
//! A [`Session`](crate::Session) that is given a [`CpuLedger`] reads its container's CPU total
//! after every command and adds what the command used (the growth since the last reading) to
//! the ledger under the session's current [`CpuPhase`]. Launch and validate each keep one
//! ledger per item and put its sums into the item's row, so that a run's tables say what each
//! task cost and where. What no session runs (image builds, kiln's own host-side work) is not
//! in a ledger: `scripts/bench-factory.sh` measures it from the engine's cgroup and kiln's
//! process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// What a command in a container was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuPhase {
    /// Launch's setup steps that install or prepare (packages, dependencies, the agent's
    /// commands), everything but the compile steps.
    Setup,
    /// Launch's setup steps that compile the project (the plan's rebuild steps).
    Compile,
    /// Launch's baseline test run, its parser script included.
    Baseline,
    /// Validation's builds: a side's patches applied and its rebuild commands run, once.
    ValidationBuild,
    /// Validation's test runs, their parser scripts included.
    ValidationTests,
}

/// CPU time per phase, shared by the sessions of one item (clones share the sums).
#[derive(Debug, Clone, Default)]
pub struct CpuLedger {
    spent: Arc<Mutex<BTreeMap<CpuPhase, Duration>>>,
}

impl CpuLedger {
    /// A ledger with nothing spent.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `used` to `phase`.
    pub fn add(&self, phase: CpuPhase, used: Duration) {
        *self
            .spent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(phase)
            .or_default() += used;
    }

    /// Seconds spent in `phase`.
    #[must_use]
    pub fn seconds(&self, phase: CpuPhase) -> f64 {
        self.spent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&phase)
            .map_or(0.0, Duration::as_secs_f64)
    }
}

/// One session's place in a ledger: the phase its commands are charged to and the container's
/// CPU total at the last reading.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    pub(crate) ledger: CpuLedger,
    pub(crate) phase: CpuPhase,
    pub(crate) seen: Duration,
}

impl Account {
    /// Charges the growth of the container's total since the last reading to the phase. A
    /// total below the last (another container behind the same id, a counter reset) charges
    /// nothing.
    pub(crate) fn charge(&mut self, total: Duration) {
        self.ledger.add(self.phase, total.saturating_sub(self.seen));
        self.seen = self.seen.max(total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reading_charges_its_growth_to_the_current_phase() {
        let ledger = CpuLedger::new();
        let mut account = Account {
            ledger: ledger.clone(),
            phase: CpuPhase::Setup,
            seen: Duration::ZERO,
        };
        account.charge(Duration::from_millis(1500));
        account.phase = CpuPhase::Compile;
        account.charge(Duration::from_millis(4000));
        // A counter that went back charges nothing, and the next growth counts from the top.
        account.charge(Duration::from_millis(100));
        account.charge(Duration::from_millis(4250));
        assert!((ledger.seconds(CpuPhase::Setup) - 1.5).abs() < 1e-9);
        assert!((ledger.seconds(CpuPhase::Compile) - 2.75).abs() < 1e-9);
        assert!(ledger.seconds(CpuPhase::Baseline).abs() < 1e-9);
    }
}
