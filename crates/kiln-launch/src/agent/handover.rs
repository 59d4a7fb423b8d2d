//! What the rules leave the agent, and the first message that tells it.

use std::time::Duration;

use kiln_core::session::tail;
use kiln_core::{RuntimeError, Session};
use kiln_schema::EnvironmentRecord;

use crate::verify::Failure;

/// What the rules leave the agent.
pub(crate) struct Handover {
    /// How the rules' attempt ended.
    pub(crate) failure: Failure,
    /// The plan's name and language.
    pub(crate) plan: String,
    pub(crate) language: String,
    /// Setup steps the rules had not run when they stopped.
    pub(crate) remaining: Vec<String>,
    /// Files the instance's test patch touches.
    pub(crate) test_files: Vec<String>,
    /// What was tried before the agent besides the rules (a recipe that did not build).
    pub(crate) note: Option<String>,
}

/// The repository's files, two levels deep, for the hand-over.
pub(super) async fn list_files(session: &mut Session) -> Result<String, RuntimeError> {
    let outcome = session
        .run(
            "git ls-files 2>/dev/null | awk -F/ 'NF<=2' | head -n 150",
            Duration::from_secs(60),
        )
        .await?;
    Ok(outcome.output)
}

/// The hand-over message, and the stable part of it that starts the replay key (no log
/// output, which may hold timings).
pub(super) fn describe(
    record: &EnvironmentRecord,
    handover: &Handover,
    files: &str,
) -> (String, String) {
    let failure = &handover.failure;
    let command = failure.command.as_deref().unwrap_or("(no command)");
    let mut text = format!(
        "Repository {} at {}. kiln's rules chose the plan `{}` ({}).\n",
        record.repo, record.base_commit, handover.plan, handover.language
    );
    if record.setup_commands.is_empty() {
        text.push_str("No setup command succeeded.\n");
    } else {
        text.push_str("Setup commands that succeeded, in order:\n");
        for done in &record.setup_commands {
            text.push_str(&format!("  $ {}\n", tail(done, 3)));
        }
    }
    if !record.environment.is_empty() {
        let names: Vec<&str> = record.environment.keys().map(String::as_str).collect();
        text.push_str(&format!(
            "Environment variables set: {}\n",
            names.join(", ")
        ));
    }
    text.push_str(&format!(
        "Then this failed ({}):\n  $ {command}\nIts output ended with:\n{}\n",
        failure.class,
        tail(&failure.log_tail, 40)
    ));
    let earlier: Vec<&String> = failure
        .error_lines
        .iter()
        .filter(|line| !failure.log_tail.contains(line.as_str()))
        .collect();
    if !earlier.is_empty() {
        text.push_str(
            "Error lines earlier in its output:
",
        );
        for line in earlier {
            text.push_str(&format!(
                "  {line}
"
            ));
        }
    }
    if !handover.remaining.is_empty() {
        text.push_str("Steps the rules had not run yet:\n");
        for step in &handover.remaining {
            text.push_str(&format!("  $ {step}\n"));
        }
    }
    if let Some(note) = &handover.note {
        text.push_str(&format!("Also: {note}\n"));
    }
    text.push_str(&format!(
        "The rules' test command: `{}` (parser `{}`).\n",
        record.test_command, record.parser
    ));
    if !record.rebuild_commands.is_empty() {
        text.push_str(&format!(
            "The rules' rebuild commands (run after a patch, before the tests; kept unless \
             finish names others): {}\n",
            record
                .rebuild_commands
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !handover.test_files.is_empty() {
        text.push_str(&format!(
            "The instance's test patch (applied later, when the environment is validated) \
             touches: {}. These files must not be changed.\n",
            handover.test_files.join(", ")
        ));
    }
    text.push_str(&format!("Files (two levels deep):\n{files}"));
    let key = format!(
        "kiln-agent-1\n{}\n{}\n{}\n{}\n{}\n{}",
        record.repo,
        record.base_commit,
        handover.plan,
        failure.class,
        command,
        record.setup_commands.join("\n")
    );
    (text, key)
}
