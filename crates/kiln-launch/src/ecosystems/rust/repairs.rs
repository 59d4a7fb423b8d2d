//! Repair rules of Cargo plans: a compile error that names the features the tests need, the
//! features the project's CI tests with, and tests narrowed to the touched packages that do not
//! compile alone. Both change the compile
//! step and the test command together, from the packages and features they select now.

use crate::ci::CargoFeatures;
use crate::plan::{CargoScope, RepairContext};
use crate::repair::{Failed, Phase, Repair, Rule, Target};

use super::commands::commands;

/// The scope of the Cargo commands, when the failing step is their compile step.
fn compiling<'a>(failed: &Failed<'_>, cx: &'a RepairContext) -> Option<&'a CargoScope> {
    let scope = cx.cargo.as_ref()?;
    (failed.step() == Some(&commands(scope).0)).then_some(scope)
}

/// The commands of `scope`, as a repair.
fn retarget(scope: CargoScope, test_scope: Option<String>) -> Repair {
    let (step, test) = commands(&scope);
    Repair::Retarget {
        step,
        test,
        scope: test_scope,
        cargo: scope,
    }
}

/// The package whose target failed to compile (`could not compile `tokio` (test "x")`).
fn failed_package(output: &str) -> Option<&str> {
    output
        .lines()
        .rev()
        .find_map(|l| l.split_once("could not compile `")?.1.split_once('`'))
        .map(|(name, _)| name)
}

/// The feature names a compile error asks for (`--features full`, `--features "a,b"`), when
/// each is a plain feature name.
fn asked_features(caps: &regex::Captures<'_>) -> Option<Vec<String>> {
    let list: Vec<String> = caps
        .get(1)?
        .as_str()
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    let plain = |f: &String| {
        f.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
    };
    (!list.is_empty() && list.iter().all(plain)).then_some(list)
}

/// The rules of Cargo plans, in the order they are tried.
pub static RULES: &[Rule] = &[
    Rule {
        name: "rust-features-asked-by-compile-error",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r#"(?m)^error: [^\n]*?--features[ =]+[`'"]?([A-Za-z0-9_][A-Za-z0-9_,-]*)"#,
        description: "a crate refuses to compile without features (`compile_error!(\"run the tests with --features full\")`, what its CI passes): the tests are compiled and run with the features it names, for the package that asked",
        repair: |f, caps, cx: &RepairContext| {
            let scope = compiling(f, cx)?;
            // `package/feature` works whichever packages the commands select.
            let package = match failed_package(f.output) {
                Some(name) => name.to_string(),
                None => match scope.packages.as_slice() {
                    [spec] => spec.split('@').next().unwrap_or(spec).to_string(),
                    _ => return None,
                },
            };
            let mut wider = scope.clone();
            for feature in asked_features(caps)? {
                let named = format!("{package}/{feature}");
                if !wider.features.contains(&named) {
                    wider.features.push(named);
                }
            }
            (wider != *scope).then(|| retarget(wider, None))
        },
    },
    Rule {
        name: "rust-features-from-ci",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"(?m)^error(?:\[E\d{4}\])?: .*",
        description: "the tests do not compile with the features kiln chose, and the project's CI runs `cargo test` with others (`--all-features`, `--features full`): the tests are compiled and run with the CI's",
        repair: |f, _, cx: &RepairContext| {
            let scope = compiling(f, cx)?;
            let mut wider = scope.clone();
            match scope.ci_features.as_ref()? {
                CargoFeatures::All => wider.all_features = true,
                CargoFeatures::List(list) => {
                    for feature in list {
                        // A bare name is the package's when one is selected, as the CI's
                        // command is the package's when it runs in its directory.
                        let named = match (feature.contains('/'), scope.packages.as_slice()) {
                            (false, [spec]) => {
                                format!("{}/{feature}", spec.split('@').next().unwrap_or(spec))
                            }
                            _ => feature.clone(),
                        };
                        if !wider.features.contains(&named) {
                            wider.features.push(named);
                        }
                    }
                }
            }
            (wider != *scope).then(|| retarget(wider, None))
        },
    },
    Rule {
        name: "rust-narrowed-tests-do-not-compile",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"(?m)^error(?:\[E\d{4}\])?: .*",
        description: "the tests of the packages the test patch touches do not compile on their own (a member that needs another's features, which only the workspace unifies): the whole workspace is compiled and tested, as its CI does",
        repair: |f, caps, cx: &RepairContext| {
            let scope = compiling(f, cx)?;
            if scope.packages.is_empty() {
                return None;
            }
            let error: String = caps[0].trim().chars().take(160).collect();
            let whole = CargoScope {
                packages: Vec::new(),
                ..scope.clone()
            };
            Some(retarget(
                whole,
                Some(format!(
                    "all (the touched packages {} did not compile alone: {error})",
                    scope.packages.join(", ")
                )),
            ))
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::testutil::step_repair_in;
    use crate::steps::Step;

    fn context(packages: &[&str], features: &[&str]) -> RepairContext {
        RepairContext {
            cargo: Some(CargoScope {
                packages: packages.iter().map(|p| (*p).to_string()).collect(),
                features: features.iter().map(|f| (*f).to_string()).collect(),
                ..CargoScope::default()
            }),
            ..RepairContext::default()
        }
    }

    /// What cargo prints for tokio's `tests/_require_full.rs` without `--features full`.
    const TOKIO: &str = "   Compiling tokio v1.35.0 (/testbed/tokio)\n\
        error: run main Tokio tests with `--features full`\n --> tokio/tests/_require_full.rs:2:1\n  |\n\
        2 | compile_error!(\"run main Tokio tests with `--features full`\");\n  | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n\n\
        error: could not compile `tokio` (test \"_require_full\") due to 1 previous error\n";

    /// The rule that repairs the compile step of `cx` failing with `output`: its name, the
    /// new compile step and test command, the row's scope and what later rules see.
    fn repaired(
        output: &str,
        cx: &RepairContext,
    ) -> Option<(&'static str, String, String, Option<String>, CargoScope)> {
        let rules: Vec<&Rule> = RULES.iter().collect();
        let (compile, _) = commands(cx.cargo.as_ref()?);
        let (name, repair) = step_repair_in(&rules, &compile, output, cx)?;
        let Repair::Retarget {
            step,
            test,
            scope,
            cargo,
        } = repair
        else {
            panic!("{repair:?}");
        };
        Some((name, step.render(), test.render(), scope, cargo))
    }

    #[test]
    fn a_compile_error_that_asks_for_features_adds_them_for_its_package() {
        let (name, step, test, scope, cargo) =
            repaired(TOKIO, &context(&["tokio@1.35.0"], &[])).unwrap();
        assert_eq!(name, "rust-features-asked-by-compile-error");
        assert_eq!(
            step,
            "cargo test -p tokio@1.35.0 --no-run --features tokio/full"
        );
        assert_eq!(
            test,
            "cargo test -p tokio@1.35.0 --no-fail-fast --features tokio/full 2>&1"
        );
        assert_eq!((scope, cargo.features), (None, vec!["tokio/full".into()]));
        // The whole workspace, with a test feature of its own already on.
        let (_, step, ..) = repaired(TOKIO, &context(&[], &["app/test-utils"])).unwrap();
        assert_eq!(
            step,
            "cargo test --workspace --no-run --features app/test-utils,tokio/full"
        );
    }

    #[test]
    fn narrowed_tests_that_do_not_compile_widen_to_the_workspace_keeping_features() {
        let error = "error[E0425]: cannot find function `extra` in crate `helper`\n";
        let (name, step, test, scope, cargo) =
            repaired(error, &context(&["a", "b"], &["a/full"])).unwrap();
        assert_eq!(name, "rust-narrowed-tests-do-not-compile");
        assert_eq!(step, "cargo test --workspace --no-run --features a/full");
        assert_eq!(
            test,
            "cargo test --workspace --no-fail-fast --features a/full 2>&1"
        );
        assert_eq!(
            scope.as_deref(),
            Some(
                "all (the touched packages a, b did not compile alone: error[E0425]: cannot find function `extra` in crate `helper`)"
            )
        );
        assert!(cargo.packages.is_empty());
    }

    #[test]
    fn the_features_of_the_ci_come_before_the_whole_workspace() {
        let error = "error[E0425]: cannot find function `extra` in crate `helper`\n";
        let with_ci = |packages: &[&str], ci| {
            let mut cx = context(packages, &[]);
            if let Some(scope) = cx.cargo.as_mut() {
                scope.ci_features = Some(ci);
            }
            cx
        };
        let listed = CargoFeatures::List(vec!["full".into(), "helper/extra".into()]);
        let (name, step, test, scope, _) =
            repaired(error, &with_ci(&["app-core"], listed.clone())).unwrap();
        assert_eq!(name, "rust-features-from-ci");
        assert_eq!(
            step,
            "cargo test -p app-core --no-run --features app-core/full,helper/extra"
        );
        assert_eq!(
            test,
            "cargo test -p app-core --no-fail-fast --features app-core/full,helper/extra 2>&1"
        );
        assert_eq!(scope, None);
        let (_, step, ..) = repaired(error, &with_ci(&[], CargoFeatures::All)).unwrap();
        assert_eq!(step, "cargo test --workspace --no-run --all-features");
        // Already on: the narrowing is what is left to change.
        let mut on = with_ci(&["app-core"], CargoFeatures::All);
        if let Some(scope) = on.cargo.as_mut() {
            scope.all_features = true;
        }
        let (name, step, ..) = repaired(error, &on).unwrap();
        assert_eq!(name, "rust-narrowed-tests-do-not-compile");
        assert_eq!(step, "cargo test --workspace --no-run --all-features");
    }

    #[test]
    fn other_steps_and_features_already_on_are_left_to_other_rules() {
        let rules: Vec<&Rule> = RULES.iter().collect();
        let narrowed = context(&["tokio"], &[]);
        assert_eq!(
            step_repair_in(
                &rules,
                &Step::Resolve("cargo fetch --locked".into()),
                TOKIO,
                &narrowed
            ),
            None
        );
        // The whole workspace with the feature on: nothing either rule can change.
        assert_eq!(repaired(TOKIO, &context(&[], &["tokio/full"])), None);
        // Narrowed with the feature on: the failure is the narrowing's.
        let (name, ..) = repaired(TOKIO, &context(&["tokio"], &["tokio/full"])).unwrap();
        assert_eq!(name, "rust-narrowed-tests-do-not-compile");
    }
}
