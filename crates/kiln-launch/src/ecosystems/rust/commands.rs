//! The compile step and the test command of a Cargo plan, from what they select: shared by the
//! plan and the repairs that widen it.

use crate::plan::CargoScope;
use crate::shell::quote as shell_quote;
use crate::steps::{Step, TestCommand};

/// The compile step and the test command of a Cargo plan selecting `scope`.
#[must_use]
pub fn commands(scope: &CargoScope) -> (Step, TestCommand) {
    let packages = if scope.packages.is_empty() {
        "--workspace".to_string()
    } else {
        scope
            .packages
            .iter()
            .map(|p| format!("-p {}", shell_quote(p)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let features = if scope.all_features {
        " --all-features".to_string()
    } else if scope.features.is_empty() {
        String::new()
    } else {
        format!(" --features {}", shell_quote(&scope.features.join(",")))
    };
    (
        Step::Shell(format!("cargo test {packages} --no-run{features}")),
        TestCommand::plain(format!(
            "cargo test {packages} --no-fail-fast{features} 2>&1"
        )),
    )
}
