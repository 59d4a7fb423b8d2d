//! The registry of ecosystems: each one's entry, in the order they are asked. Adding an
//! ecosystem is a folder (its planner, image, rules and `ENTRY`) and a line here.

use kiln_core::ImageBuild;

use super::entry::{Ecosystem, Entry};
use super::{go, java, native, node, python, rust};
use crate::debian::Suite;
use crate::plan::{Plan, PlanContext};
use crate::repair::Rule;
use crate::steps::{FreshInstall, TestCommand};

/// The ecosystems in the order they are asked: Python first (a repository with bindings in
/// several languages is most often tested from Python), then Rust, Node, Go, C/C++ and Java.
/// An ecosystem's own setup rules come before or after the system rules as each needs (Node's
/// native addons are retried without scripts only once a missing header had its chance); the
/// optional-step rule is always last.
static REGISTRY: &[&Entry] = &[
    &python::ENTRY,
    &rust::ENTRY,
    &node::ENTRY,
    &go::ENTRY,
    &native::ENTRY,
    &java::ENTRY,
];

/// The first ecosystem whose planner recognises the repository, and its plan, with the
/// services the repository's CI starts for its tests ([`crate::services`]).
#[must_use]
pub fn choose(cx: &PlanContext<'_>) -> Option<(Ecosystem, Plan)> {
    let (ecosystem, mut plan) = REGISTRY
        .iter()
        .find_map(|e| (e.plan)(cx).map(|plan| (Ecosystem(e), plan)))?;
    crate::services::apply(&mut plan, &crate::ci::services(cx.root));
    crate::ci_variables::apply(&mut plan, &crate::ci::environment(cx.root));
    // The whole suite runs with what the tests run before them: the services, the variables.
    if let Some(whole) = &mut plan.whole_test {
        whole.prelude.clone_from(&plan.test.prelude);
    }
    Some((ecosystem, plan))
}

/// The plan of a repository no ecosystem recognises, for the launch agent: C/C++'s toolchain
/// image with the checkout and nothing to run ([`native::bare`]).
#[must_use]
pub fn bare(cx: &PlanContext<'_>) -> (Ecosystem, Plan) {
    (Ecosystem(&native::ENTRY), native::bare(cx))
}

/// What `ecosystem`'s interpreter images hold, in words (`Python`, `toolchain`): what a repair
/// that starts over on another Debian suite changes.
#[must_use]
pub fn interpreter_name(ecosystem: Ecosystem) -> &'static str {
    ecosystem
        .entry()
        .interpreter
        .map_or("toolchain", |(_, name)| name)
}

/// The shell expression of the package index `ecosystem`'s installers read, if it has one.
#[must_use]
pub fn package_index(ecosystem: Ecosystem) -> Option<&'static str> {
    ecosystem.entry().package_index
}

/// The tracked files (by name) `ecosystem`'s package managers may rewrite during setup.
#[must_use]
pub fn rewrites(ecosystem: Ecosystem) -> &'static [&'static str] {
    ecosystem.entry().rewrites
}

/// What a reused environment of `ecosystem` clears before its installs run again.
#[must_use]
pub fn fresh_install(ecosystem: Ecosystem) -> Option<FreshInstall> {
    ecosystem.entry().fresh
}

/// `command` without `tests` (ids as `parser` reads them, among `reported`, all the ids the
/// run reported), and the tests it leaves out, when `ecosystem`'s runner for that parser can
/// leave (some of) them out exactly.
#[must_use]
pub fn leave_out(
    ecosystem: Ecosystem,
    command: &TestCommand,
    parser: &str,
    tests: &[String],
    reported: &[&str],
) -> Option<(TestCommand, Vec<String>)> {
    if tests.is_empty() {
        return None;
    }
    ecosystem
        .entry()
        .leave_out
        .and_then(|leave_out| leave_out(command, parser, tests, reported))
        .filter(|(_, left)| !left.is_empty())
}

/// The repair rules of `ecosystem`'s plans, in the order they are tried.
#[must_use]
pub fn rules(ecosystem: Ecosystem) -> Vec<&'static Rule> {
    ecosystem
        .entry()
        .rules
        .iter()
        .flat_map(|t| t.iter())
        .collect()
}

/// The image of `suite`'s interpreter for a plan of `ecosystem`, when it has such images.
#[must_use]
pub fn interpreter_image(
    ecosystem: Ecosystem,
    suite: Suite,
    ca_bundle: Option<&[u8]>,
) -> Option<ImageBuild> {
    ecosystem
        .entry()
        .interpreter
        .map(|(image, _)| image(suite, ca_bundle))
}

/// Every rule once, in a stable order (each ecosystem's, in registry order), with the
/// ecosystems it applies to.
#[must_use]
pub fn rule_table() -> Vec<(&'static Rule, Vec<Ecosystem>)> {
    let mut table: Vec<(&'static Rule, Vec<Ecosystem>)> = Vec::new();
    for entry in REGISTRY {
        for rule in entry.rules.iter().flat_map(|t| t.iter()) {
            match table.iter_mut().find(|(r, _)| r.name == rule.name) {
                Some((_, ecosystems)) => ecosystems.push(Ecosystem(entry)),
                None => table.push((rule, vec![Ecosystem(entry)])),
            }
        }
    }
    // The rules every ecosystem shares come last, the optional step at the very end.
    table.sort_by_key(|(rule, ecosystems)| {
        (
            ecosystems.len() == REGISTRY.len(),
            rule.name == "optional-step",
        )
    });
    table
}

/// Whether a rule applies to every ecosystem.
#[must_use]
pub fn applies_everywhere(ecosystems: &[Ecosystem]) -> bool {
    ecosystems.len() == REGISTRY.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{RepairContext, TestScope};
    use crate::repair::{Failed, Failing, Repair, find};
    use crate::steps::Step;

    /// Runs `ecosystem`'s fresh-install script in a git repository that tracks `tracked` and
    /// holds `written` besides; the files left of both.
    fn after_fresh_install(
        ecosystem: Ecosystem,
        tracked: &[&str],
        written: &[&str],
    ) -> Vec<String> {
        let files: Vec<(&str, &str)> = tracked.iter().chain(written).map(|f| (*f, "x")).collect();
        let repo = crate::testutil::tree(&files);
        let sh = |script: &str| {
            let out = std::process::Command::new("sh")
                .args(["-c", script])
                .current_dir(repo.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{script}: {out:?}");
        };
        let add: Vec<String> = tracked.iter().map(|f| crate::shell::quote(f)).collect();
        sh(&format!("git init -q . && git add -- {}", add.join(" ")));
        sh(&(fresh_install(ecosystem).unwrap().script)());
        tracked
            .iter()
            .chain(written)
            .filter(|f| repo.path().join(f).exists())
            .map(|f| (*f).to_string())
            .collect()
    }

    #[test]
    fn a_fresh_install_clears_what_an_install_wrote_and_keeps_what_the_repository_tracks() {
        // Python's script removes the container's virtualenv: the real-engine reuse test runs it.
        assert_eq!(
            after_fresh_install(
                Ecosystem(&node::ENTRY),
                &["package.json"],
                &[
                    "package-lock.json",
                    "node_modules/a/index.js",
                    "web/node_modules/b.js",
                    "dist/x.js"
                ]
            ),
            ["package.json", "dist/x.js"]
        );
        assert_eq!(
            after_fresh_install(
                Ecosystem(&node::ENTRY),
                &["package.json", "yarn.lock"],
                &["node_modules/a/index.js"]
            ),
            ["package.json", "yarn.lock", "node_modules/a/index.js"]
        );
        assert_eq!(
            after_fresh_install(
                Ecosystem(&rust::ENTRY),
                &["Cargo.toml"],
                &["Cargo.lock", "target/debug/x"]
            ),
            ["Cargo.toml", "target/debug/x"]
        );
        assert_eq!(
            after_fresh_install(Ecosystem(&rust::ENTRY), &["Cargo.toml", "Cargo.lock"], &[]),
            ["Cargo.toml", "Cargo.lock"]
        );
        assert_eq!(
            after_fresh_install(
                Ecosystem(&native::ENTRY),
                &["CMakeLists.txt"],
                &["build-kiln/CMakeCache.txt", "build-kiln/a.o"]
            ),
            ["CMakeLists.txt", "build-kiln/a.o"]
        );
        assert!(fresh_install(Ecosystem(&go::ENTRY)).is_none());
    }

    #[test]
    fn each_ecosystem_is_chosen_for_its_files_in_registry_order() {
        let trees: &[(&[(&str, &str)], Ecosystem)] = &[
            (
                &[("pyproject.toml", "[project]\nname = 'x'\n")],
                Ecosystem(&python::ENTRY),
            ),
            (
                &[("Cargo.toml", "[package]\nname = 'x'\nversion = '0.1.0'\n")],
                Ecosystem(&rust::ENTRY),
            ),
            (
                &[("package.json", r#"{"scripts":{"test":"jest"}}"#)],
                Ecosystem(&node::ENTRY),
            ),
            (
                &[("go.mod", "module x\n\ngo 1.19\n")],
                Ecosystem(&go::ENTRY),
            ),
            (
                &[("CMakeLists.txt", "project(x)\nenable_testing()\n")],
                Ecosystem(&native::ENTRY),
            ),
            (
                &[("pom.xml", "<project></project>\n")],
                Ecosystem(&java::ENTRY),
            ),
            // Python bindings of a Rust crate are tested from Python.
            (
                &[
                    ("Cargo.toml", "[package]\nname = 'x'\n"),
                    ("pyproject.toml", "[project]\nname = 'x'\n"),
                ],
                Ecosystem(&python::ENTRY),
            ),
        ];
        for (files, expected) in trees {
            let tmp = crate::plan::testutil::tree(files);
            let (ecosystem, _) = choose(&PlanContext {
                root: tmp.path(),
                cutoff: None,
                ca_bundle: None,
                test_files: &[],
                scope: TestScope::Auto,
                case_timeout: std::time::Duration::from_secs(300),
            })
            .unwrap_or_else(|| panic!("no plan for {files:?}"));
            assert_eq!(ecosystem, *expected, "{files:?}");
        }
        let empty = crate::plan::testutil::tree(&[("README.md", "")]);
        assert!(
            choose(&PlanContext {
                root: empty.path(),
                cutoff: None,
                ca_bundle: None,
                test_files: &[],
                scope: TestScope::Auto,
                case_timeout: std::time::Duration::from_secs(300),
            })
            .is_none()
        );
    }

    #[test]
    fn rule_names_are_unique_and_every_signature_compiles() {
        let table = rule_table();
        let mut names = std::collections::BTreeSet::new();
        for (rule, _) in &table {
            assert!(
                crate::repair::compiles(rule),
                "{} does not compile",
                rule.name
            );
            assert!(names.insert(rule.name), "{} twice", rule.name);
        }
        for ecosystem in REGISTRY.iter().map(|e| Ecosystem(e)) {
            let rules = rules(ecosystem);
            assert_eq!(
                rules.last().map(|r| r.name),
                Some("optional-step"),
                "{ecosystem:?}"
            );
        }
        let (last, everywhere) = table.last().unwrap();
        assert_eq!(last.name, "optional-step");
        assert!(applies_everywhere(everywhere));
        let python_only = table
            .iter()
            .find(|(r, _)| r.name == "python-editable-backend")
            .unwrap();
        assert_eq!(python_only.1, [Ecosystem(&python::ENTRY)]);
    }

    #[test]
    fn system_rules_apply_to_python_and_an_optional_step_comes_after_nodes_own() {
        let context = RepairContext {
            node_major: 18,
            optional: vec![Step::shell("npm run build")],
            ..RepairContext::default()
        };
        let configure = Step::shell("uv pip install -e .");
        let failed = Failed {
            failing: Failing::Step(&configure),
            output: "./configure: line 12: pkg-config: command not found",
        };
        let (rule, _, _) = find(&failed, &context, &rules(Ecosystem(&python::ENTRY)), &[]).unwrap();
        assert_eq!(rule.name, "pkg-config");

        let build = Step::shell("npm run build");
        let failed = Failed {
            failing: Failing::Step(&build),
            output: "> webpack\nError: error:0308010C:digital envelope routines::unsupported\n    at new Hash\n\n",
        };
        let node = rules(Ecosystem(&node::ENTRY));
        let (rule, _, _) = find(&failed, &context, &node, &[]).unwrap();
        assert_eq!(rule.name, "node-legacy-openssl");
        let (rule, repair, matched) =
            find(&failed, &context, &node, &["node-legacy-openssl"]).unwrap();
        assert_eq!(
            (rule.name, &repair, matched.as_str()),
            ("optional-step", &Repair::Skip(build.clone()), "at new Hash")
        );
        // Node 16 has OpenSSL 1.1: the switch does not exist there.
        let node16 = RepairContext {
            node_major: 16,
            ..context.clone()
        };
        let (rule, _, _) = find(&failed, &node16, &node, &[]).unwrap();
        assert_eq!(rule.name, "optional-step");
        // Python rules are not Node's.
        let pip_fail = Failed {
            failing: Failing::Step(&configure),
            output: "AttributeError: module 'setuptools.build_meta' has no attribute 'build_editable'",
        };
        assert!(find(&pip_fail, &context, &node, &[]).is_none());
    }

    #[test]
    fn every_image_installs_the_bundle_after_apt_and_gets_its_own_tag() {
        let release = |major| node::version::release(major).expect("a Node release");
        let images = [
            rust::image(Some(b"PEM")),
            node::image(release(18), Some(b"PEM")),
            node::image(release(20), Some(b"PEM")),
            go::image(Suite::Bookworm, Some(b"PEM")),
            go::image(Suite::Trixie, Some(b"PEM")),
            native::image(Suite::Bookworm, Some(b"PEM")),
            java::image(11, Some(b"PEM")),
            java::image(21, Some(b"PEM")),
            node::image(release(14), Some(b"PEM")),
            python::image(Suite::Bookworm, Some(b"PEM")),
            python::image(Suite::Bullseye, Some(b"PEM")),
            native::image(Suite::Bullseye, Some(b"PEM")),
        ];
        for build in &images {
            let file = &build.dockerfile;
            let apt = file.find("apt-get install").unwrap_or(usize::MAX);
            let update = file.find("RUN update-ca-certificates").unwrap_or(0);
            assert!(apt < update, "{file}");
            assert!(!file.contains(crate::images::CA_BUNDLE_MARKER));
        }
        let mut tags: Vec<&str> = images.iter().map(|b| b.tag.as_str()).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), images.len(), "{tags:?}");
        assert!(images[2].tag.starts_with("kiln/node:20-"));
        assert!(images[2].dockerfile.contains("ARG SUITE=trixie\n"));
        assert!(images[7].dockerfile.contains("ARG JDK=21\n"));
        assert!(images[11].tag.starts_with("kiln/cpp:bullseye-"));
        assert!(images[11].dockerfile.contains("ARG SUITE=bullseye\n"));
        assert!(images[6].tag.starts_with("kiln/java:17-"));
        assert!(images[8].tag.starts_with("kiln/node:14-"));
        for arg in [
            "ARG NODE_VERSION=14.21.3\n",
            "ARG NPM_VERSION=6.14.18\n",
            "ARG REGISTRY=https://registry.npmjs.org\n",
        ] {
            assert!(
                images[8].dockerfile.contains(arg),
                "{}",
                images[8].dockerfile
            );
        }
        assert_eq!(
            interpreter_image(Ecosystem(&python::ENTRY), Suite::Bullseye, Some(b"PEM"))
                .map(|i| i.tag),
            Some(images[10].tag.clone())
        );
        assert!(interpreter_image(Ecosystem(&rust::ENTRY), Suite::Bullseye, None).is_none());
    }
}
