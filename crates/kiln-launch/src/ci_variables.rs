//! The variables a repository's CI sets for its jobs and the project reads
//! ([`crate::ci::environment`]), exported in every test container before the tests run, as
//! the services are started there ([`crate::services`]).

use crate::plan::Plan;
use crate::shell::quote;

/// Adds `variables` to `plan`'s test command (those the command does not set itself: the
/// test script's own assignments win) and a word in the version reason.
pub fn apply(plan: &mut Plan, variables: &[(String, String)]) {
    let added: Vec<&(String, String)> = variables
        .iter()
        .filter(|(name, _)| !plan.test.env.iter().any(|(set, _)| set == name))
        .collect();
    if added.is_empty() {
        return;
    }
    let words: Vec<String> = added
        .iter()
        .map(|(name, value)| format!("{name}={}", quote(value)))
        .collect();
    plan.test
        .prelude
        .push(format!("export {}", words.join(" ")));
    plan.version_reason.push_str(&format!(
        "; variables the CI sets that the project reads: {}",
        words.join(" ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    #[test]
    fn variables_are_exported_before_the_tests_unless_the_command_sets_them() {
        let mut plan = plan_of(
            crate::ecosystems::node::plan,
            &[(
                "package.json",
                r#"{"scripts":{"test":"cross-env TZ=Europe/Paris jest"},"devDependencies":{"jest":"^29"}}"#,
            )],
            None,
        )
        .expect("a plan");
        apply(
            &mut plan,
            &[
                ("DATABASE_URL".into(), "postgres://a:b@localhost/c".into()),
                ("TZ".into(), "UTC".into()),
            ],
        );
        let command = plan.test.render();
        assert!(
            command.starts_with("export DATABASE_URL=postgres://a:b@localhost/c; "),
            "{command}"
        );
        assert!(command.contains("TZ=Europe/Paris"), "{command}");
        assert!(!command.contains("TZ=UTC"), "{command}");
        assert!(
            plan.version_reason
                .ends_with("; variables the CI sets that the project reads: DATABASE_URL=postgres://a:b@localhost/c"),
            "{}",
            plan.version_reason
        );
    }
}
