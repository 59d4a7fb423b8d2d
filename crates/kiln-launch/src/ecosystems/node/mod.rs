//! The Node/TypeScript plan: `package.json` decides the Node version (with `.nvmrc` and
//! `.node-version`), the lockfile decides the package manager, and the test script and
//! dependencies decide the runner, which is asked for a structured report where it has one.

pub mod detect;
pub mod repairs;
pub mod selection;
pub mod version;

use crate::plan::{Plan, PlanContext, RepairContext};
use crate::shell::quote as shell_quote;
use crate::steps::{FreshInstall, NodeInstall, NodeManager, Step, TestCommand, remove_untracked};

use super::entry::Entry;
use detect::{NodeProject, PackageManager, Runner, detect};
use selection::{JEST_REPORT, MOCHA_REPORT, VITEST_REPORT};

pub use version::image;

/// Setup steps that install the dependencies, what fixes their versions, and whether the
/// cut-off was applied.
fn install(manager: &PackageManager, cutoff: Option<&str>) -> (Vec<Step>, String, bool) {
    match manager {
        PackageManager::NpmLocked => (
            vec![Step::Node(NodeInstall::new(NodeManager::NpmLocked))],
            "package-lock.json pins every dependency (npm ci)".into(),
            false,
        ),
        PackageManager::NpmUnlocked => match cutoff {
            Some(cutoff) => (
                vec![Step::Node(NodeInstall {
                    cutoff: Some(cutoff.to_string()),
                    ..NodeInstall::new(NodeManager::Npm)
                })],
                format!("no lockfile: npm install --before {cutoff}"),
                true,
            ),
            None => (
                vec![Step::Node(NodeInstall::new(NodeManager::Npm))],
                "no lockfile and no cut-off date: newest versions".into(),
                false,
            ),
        },
        PackageManager::Yarn {
            berry,
            version,
            yarn_path,
        } => {
            let mut setup = Vec::new();
            if *berry && !yarn_path {
                // Yarn 2+ without a committed release: install the declared one over the
                // image's yarn classic (`@yarnpkg/cli-dist` is the published Yarn 2+ CLI).
                let version = version.clone().unwrap_or_else(|| "4".into());
                setup.push(Step::Shell(format!(
                    "npm install -g --force @yarnpkg/cli-dist@{}",
                    shell_quote(&version)
                )));
            }
            let manager = if *berry {
                NodeManager::YarnBerry
            } else {
                NodeManager::YarnClassic
            };
            setup.push(Step::Node(NodeInstall::new(manager)));
            (setup, "yarn.lock pins every dependency".into(), false)
        }
        PackageManager::Pnpm { version } => (
            vec![
                Step::Shell(format!("npm install -g pnpm@{}", shell_quote(version))),
                Step::Node(NodeInstall::new(NodeManager::Pnpm)),
            ],
            format!("pnpm-lock.yaml pins every dependency (pnpm {version})"),
            false,
        ),
    }
}

/// How to run a package binary with this package manager.
fn exec_prefix(manager: &PackageManager) -> &'static str {
    match manager {
        // `--no-install`: a missing runner must fail, not be fetched at today's version.
        PackageManager::NpmLocked | PackageManager::NpmUnlocked => "npx --no-install",
        PackageManager::Yarn { .. } => "yarn",
        PackageManager::Pnpm { .. } => "pnpm exec",
    }
}

/// Where the image keeps kiln's jasmine reporter.
const JASMINE_REPORTER_PATH: &str = "/opt/kiln/jasmine-tap.cjs";

/// kiln's reporter for jasmine 3 and later (`--reporter=<module>`): TAP, one line per spec with
/// its full name (suite and spec descriptions, as jasmine joins them), pending and excluded
/// specs as skips, and a failing suite or top level as a failure of its own, so that a
/// non-zero exit always has a failing test to show.
pub const JASMINE_REPORTER: &str = r#"'use strict';
// Written by kiln: jasmine's results as TAP, one line per spec named by its full name.
function KilnTapReporter() {
  let count = 0;
  const name = (text) => String(text).replace(/\s+/g, ' ').replace(/#/g, '\\#').trim();
  const print = (text) => process.stdout.write(text + '\n');
  const failed = (result) => result.status === 'failed' || (result.failedExpectations || []).length > 0;
  this.jasmineStarted = () => print('TAP version 13');
  this.specDone = (result) => {
    count += 1;
    if (result.status === 'passed') print(`ok ${count} - ${name(result.fullName)}`);
    else if (result.status === 'failed') print(`not ok ${count} - ${name(result.fullName)}`);
    else print(`ok ${count} - ${name(result.fullName)} # SKIP ${result.status}`);
  };
  this.suiteDone = (result) => {
    if (failed(result)) { count += 1; print(`not ok ${count} - ${name(result.fullName)} (suite)`); }
  };
  this.jasmineDone = (result) => {
    if ((result.failedExpectations || []).length > 0) { count += 1; print(`not ok ${count} - (top level)`); }
    print(`1..${count}`);
  };
}
module.exports = KilnTapReporter;
"#;

/// The setup step that writes [`JASMINE_REPORTER`] into the image.
fn jasmine_reporter_setup() -> Step {
    Step::Shell(format!(
        "mkdir -p /opt/kiln && cat > {JASMINE_REPORTER_PATH} <<'KILN_REPORTER_EOF'\n{JASMINE_REPORTER}KILN_REPORTER_EOF"
    ))
}

/// The test command and its parser.
fn test_command(project: &NodeProject) -> (TestCommand, &'static str) {
    let exec = exec_prefix(&project.manager);
    // The script's words are shell words already (npm runs scripts with sh), so they are
    // passed on as written, quotes included.
    let mut env = vec![("CI".to_string(), "true".to_string())];
    env.extend(project.runner_env.iter().cloned());
    let args: String = project
        .runner_args
        .iter()
        .map(|a| format!(" {a}"))
        .collect();
    let command = |run: String, report: Option<&str>| TestCommand {
        env: env.clone(),
        run,
        report: report.map(str::to_string),
        prelude: Vec::new(),
    };
    match project.runner {
        Runner::Jest => (
            command(
                format!("{exec} jest{args}{JEST_REPORT} --outputFile=/tmp/kiln-jest.json 2>&1"),
                Some("/tmp/kiln-jest.json"),
            ),
            "jest-json",
        ),
        Runner::ReactScripts => (
            command(
                format!(
                    "{exec} react-scripts test{args} --watchAll=false{JEST_REPORT} --outputFile=/tmp/kiln-jest.json 2>&1"
                ),
                Some("/tmp/kiln-jest.json"),
            ),
            "jest-json",
        ),
        Runner::Vitest => (
            command(
                format!(
                    "{exec} vitest run{args}{VITEST_REPORT} --outputFile=/tmp/kiln-vitest.json 2>&1"
                ),
                Some("/tmp/kiln-vitest.json"),
            ),
            "vitest-json",
        ),
        Runner::Mocha => (
            command(format!("{exec} mocha{args}{MOCHA_REPORT} 2>&1"), None),
            "mocha-json",
        ),
        Runner::NodeTest => (
            command(format!("node --test{args} 2>&1"), None),
            "node-test",
        ),
        Runner::Ava => (command(format!("{exec} ava{args} --tap 2>&1"), None), "tap"),
        Runner::Jasmine => (
            command(
                format!("{exec} jasmine{args} --reporter={JASMINE_REPORTER_PATH} 2>&1"),
                None,
            ),
            "tap",
        ),
        Runner::Script => {
            let run = match project.manager {
                PackageManager::Yarn { .. } => "yarn test",
                PackageManager::Pnpm { .. } => "pnpm test",
                _ => "npm test",
            };
            (
                TestCommand {
                    env: vec![("CI".to_string(), "true".to_string())],
                    run: format!("{run} 2>&1"),
                    report: None,
                    prelude: Vec::new(),
                },
                "tap",
            )
        }
    }
}

/// A new install in an environment of Node's: the lockfiles an install wrote go, and with no
/// npm, yarn or pnpm lockfile tracked every `node_modules` (npm reads it as the tree to keep).
pub const FRESH: FreshInstall = FreshInstall {
    clears: "untracked lockfiles and, with none tracked, node_modules",
    script: || {
        const LOCKS: [&str; 4] = [
            "package-lock.json",
            "npm-shrinkwrap.json",
            "yarn.lock",
            "pnpm-lock.yaml",
        ];
        format!(
            "{} && if [ -z \"$(git ls-files -- {})\" ]; \
             then find . -name node_modules -type d -prune -exec rm -rf {{}} +; fi",
            remove_untracked(&LOCKS),
            crate::shell::join(&LOCKS)
        )
    },
};

/// The Node plan, when the root holds a `package.json`.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let mut project = detect(cx.root, cx.cutoff)?;
    // Jest, Vitest and mocha run the touched directories where the scope says so; the
    // script's own files give way to them.
    let mut test_scope = "all".to_string();
    let whole_args = project.runner_args.clone();
    if matches!(
        project.runner,
        Runner::Jest | Runner::ReactScripts | Runner::Vitest
    ) && let Some((dirs, described)) = selection::selection(
        cx.root,
        cx.scope,
        cx.test_files,
        project.runner != Runner::Vitest,
    ) {
        project.runner_args = detect::without_positionals(&project.runner_args)
            .into_iter()
            .chain(dirs)
            .collect();
        test_scope = described;
    } else if project.runner == Runner::Mocha {
        let specs: Vec<String> = detect::positionals(&project.runner_args)
            .into_iter()
            .cloned()
            .collect();
        if let Some((args, described)) = selection::mocha_selection(
            cx.root,
            cx.scope,
            cx.test_files,
            &specs,
            project.mocha_config_spec,
        ) {
            project.runner_args = detect::without_positionals(&project.runner_args)
                .into_iter()
                .chain(args)
                .collect();
            test_scope = described;
        }
    }
    let (mut setup, resolution, cutoff_applied) = install(&project.manager, cx.cutoff);
    setup.insert(0, Step::git_setup());
    let mut rebuild = Vec::new();
    // A failing build (webpack 4 on OpenSSL 3, a bundler plugin that needs another Node) does
    // not end the launch by itself: tests often run from the sources.
    let mut optional = Vec::new();
    if project.build_script {
        let build = match project.manager {
            PackageManager::Yarn { .. } => "yarn run build",
            PackageManager::Pnpm { .. } => "pnpm run build",
            _ => "npm run build",
        };
        let build = Step::shell(build);
        setup.push(build.clone());
        rebuild.push(build.clone());
        optional.push(build);
    }
    if project.runner == Runner::Jasmine {
        setup.push(jasmine_reporter_setup());
    }
    let (test, parser) = test_command(&project);
    let whole_test = (project.runner_args != whole_args).then(|| {
        let runner_args = std::mem::replace(&mut project.runner_args, whole_args);
        let (whole, _) = test_command(&project);
        project.runner_args = runner_args;
        whole
    });
    let manager = match project.manager {
        PackageManager::NpmLocked | PackageManager::NpmUnlocked => "npm",
        PackageManager::Yarn { .. } => "yarn",
        PackageManager::Pnpm { .. } => "pnpm",
    };
    let runner = match project.runner {
        Runner::Jest | Runner::ReactScripts => "jest",
        Runner::Vitest => "vitest",
        Runner::Mocha => "mocha",
        Runner::NodeTest => "node-test",
        Runner::Ava => "ava",
        Runner::Jasmine => "jasmine",
        Runner::Script => "script",
    };
    let mut version_reason = project.node_reason.clone();
    if project.runner == Runner::Script {
        version_reason.push_str(
            "; no known test runner in the test script or dependencies: `npm test` read as TAP",
        );
    }
    Some(Plan {
        name: format!(
            "{}-{manager}-{runner}",
            if project.typescript { "ts" } else { "node" }
        ),
        language: if project.typescript {
            "typescript"
        } else {
            "javascript"
        },
        image: image(project.node, cx.ca_bundle),
        version_reason,
        setup,
        rebuild,
        test,
        test_scope,
        whole_test,
        collect: None,
        parser,
        resolution,
        cutoff: if cutoff_applied {
            cx.cutoff.map(str::to_string)
        } else {
            None
        },
        repair: RepairContext {
            optional,
            node_major: project.node.major,
            ..RepairContext::default()
        },
    })
}

/// The line in the registry of JavaScript and TypeScript (npm, yarn, pnpm).
pub(crate) static ENTRY: Entry = Entry {
    name: "node",
    plan,
    rules: &[crate::repair::SYSTEM, repairs::RULES, crate::repair::LAST],
    interpreter: None,
    fresh: Some(FRESH),
    rewrites: &[
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
    ],
    package_index: Some(
        "$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)",
    ),
    leave_out: Some(selection::leave_out),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    fn node_plan(files: &[(&str, &str)], cutoff: Option<&str>) -> Plan {
        plan_of(plan, files, cutoff).expect("no plan")
    }

    #[test]
    fn jasmine_runs_with_kilns_tap_reporter_written_by_setup() {
        let plan = node_plan(
            &[
                (
                    "package.json",
                    r#"{"scripts":{"test":"jasmine --config=jasmine.json --reporter=jasmine-spec-reporter"},"devDependencies":{"jasmine":"^3.6.3"}}"#,
                ),
                ("package-lock.json", "{}"),
            ],
            Some("2020-11-01T00:00:00Z"),
        );
        assert_eq!(plan.name, "node-npm-jasmine");
        assert_eq!(plan.parser, "tap");
        assert!(
            plan.test.render().contains(
                "npx --no-install jasmine --config=jasmine.json --reporter=/opt/kiln/jasmine-tap.cjs 2>&1"
            ),
            "{}",
            plan.test.render()
        );
        // The reporter is written by a setup command (so the image and its Dockerfile have it),
        // byte for byte as kiln holds it.
        let writer = plan
            .setup
            .iter()
            .map(Step::render)
            .find(|c| c.contains(JASMINE_REPORTER_PATH))
            .unwrap_or_else(|| panic!("no reporter in {:?}", plan.setup));
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("kiln");
        let command = writer.replace("/opt/kiln", &target.to_string_lossy());
        let status = std::process::Command::new("sh")
            .args(["-c", &command])
            .status()
            .unwrap();
        assert!(status.success());
        let written = std::fs::read_to_string(target.join("jasmine-tap.cjs")).unwrap_or_default();
        assert_eq!(written, JASMINE_REPORTER);
    }

    #[test]
    fn jest_with_a_lockfile_uses_npm_ci_and_a_json_report() {
        let plan = node_plan(
            &[
                (
                    "package.json",
                    r#"{"scripts":{"test":"NODE_ENV=test jest --config jest.config.js --watch"},"devDependencies":{"jest":"^29"},"engines":{"node":">=16"}}"#,
                ),
                ("package-lock.json", "{}"),
            ],
            Some("2023-03-01T00:00:00Z"),
        );
        assert_eq!(plan.name, "node-npm-jest");
        assert_eq!(plan.parser, "jest-json");
        assert!(
            plan.setup[1].render().starts_with("npm ci"),
            "{:?}",
            plan.setup
        );
        assert!(
            plan.test.render().contains(
                "CI=true NODE_ENV=test npx --no-install jest --config jest.config.js --ci --json"
            ),
            "{}",
            plan.test.render()
        );
        assert!(plan.test.render().starts_with("rm -f /tmp/kiln-jest.json;"));
        assert!(plan.test.render().ends_with("exit $rc"));
        assert!(
            plan.image.tag.starts_with("kiln/node:18-"),
            "{}",
            plan.image.tag
        );
        assert!(
            plan.version_reason.contains(
                "Node 18 (Debian bookworm): Node 18 was the active LTS on 2023-03-01, and engines.node `>=16` admits it"
            ),
            "{}",
            plan.version_reason
        );
        assert_eq!(plan.cutoff, None);
    }

    /// markdown-it's script (2026): the `dot` reporter names no test, so kiln leaves the
    /// reporter to node (TAP without a terminal), in either spelling of the flag.
    #[test]
    fn node_test_reporters_of_the_script_are_left_out() {
        for script in [
            "node --test --test-reporter=dot test/a/**/*.test.mjs test/b/**/*.test.mjs",
            "node --test --test-reporter dot --test-reporter-destination stdout test/a/**/*.test.mjs test/b/**/*.test.mjs",
        ] {
            let plan = node_plan(
                &[(
                    "package.json",
                    &format!(r#"{{"scripts":{{"test":"{script}"}},"engines":{{"node":">=20"}}}}"#),
                )],
                None,
            );
            assert_eq!(
                plan.test.render(),
                "CI=true node --test test/a/**/*.test.mjs test/b/**/*.test.mjs 2>&1",
                "{script}"
            );
        }
    }

    #[test]
    fn no_lockfile_installs_before_the_cutoff() {
        let plan = node_plan(
            &[(
                "package.json",
                r#"{"scripts":{"test":"node --test test/"},"engines":{"node":">=20"}}"#,
            )],
            Some("2024-05-01T10:00:00Z"),
        );
        assert_eq!(
            plan.setup[1].render(),
            "npm install --before 2024-05-01T10:00:00Z"
        );
        assert_eq!(plan.cutoff.as_deref(), Some("2024-05-01T10:00:00Z"));
        assert_eq!(plan.test.render(), "CI=true node --test test/ 2>&1");
        assert_eq!(plan.parser, "node-test");
        assert!(plan.image.tag.starts_with("kiln/node:20-"));
        assert!(
            plan.version_reason
                .contains("engines.node `>=20` admits it"),
            "{}",
            plan.version_reason
        );
    }

    #[test]
    fn a_test_script_that_runs_other_scripts_is_written_out() {
        let test_of = |scripts: &str| {
            node_plan(
                &[(
                    "package.json",
                    &format!(r#"{{"scripts":{scripts},"devDependencies":{{"mocha":"^8"}}}}"#),
                )],
                None,
            )
            .test
            .render()
        };
        // npm-run-all over suites, each a mocha run of its own files (as Prism's tests are).
        assert_eq!(
            test_of(
                r#"{"lint":"eslint .","test:aliases":"mocha tests/aliases-test.js","test:core":"mocha tests/core/**/*.js","test:deep:x":"mocha tests/deep.js","test":"npm-run-all test:*"}"#
            ),
            "CI=true npx --no-install mocha tests/aliases-test.js tests/core/**/*.js --reporter json 2>&1"
        );
        assert_eq!(
            test_of(
                r#"{"test:a":"mocha a.js","test:deep:x":"mocha deep.js","test":"run-s lint 'test:**'","lint":"eslint ."}"#
            ),
            "CI=true npx --no-install mocha a.js deep.js --reporter json 2>&1"
        );
        // `npm run` and `yarn`, nested, flags from the first run kept.
        assert_eq!(
            test_of(
                r#"{"test":"npm run lint && npm run test:unit","lint":"eslint .","test:unit":"yarn unit","unit":"mocha --check-leaks test/unit && mocha test/int"}"#
            ),
            "CI=true npx --no-install mocha --check-leaks test/unit test/int --reporter json 2>&1"
        );
        // A script that names itself does not loop.
        assert_eq!(
            test_of(r#"{"test":"npm run t","t":"npm run t && mocha x.js"}"#),
            "CI=true npx --no-install mocha x.js --reporter json 2>&1"
        );
    }

    #[test]
    fn a_script_that_runs_some_files_and_then_the_whole_suite_runs_the_whole_suite() {
        let test_of = |scripts: &str| {
            node_plan(
                &[(
                    "package.json",
                    &format!(r#"{{"scripts":{scripts},"devDependencies":{{"jest":"^29"}}}}"#),
                )],
                None,
            )
            .test
            .render()
        };
        // One file under several time zones, then everything (as dayjs's script does): the
        // whole suite, with its own environment, not the first file's.
        let whole = test_of(
            r#"{"test":"TZ=Pacific/Auckland npm run test-tz && TZ=Europe/London npm run test-tz && npm run test-tz && jest","test-tz":"date && jest test/timezone.test --coverage=false"}"#,
        );
        assert!(whole.contains("npx --no-install jest --ci"), "{whole}");
        assert!(!whole.contains("timezone"), "{whole}");
        // A config file is no selection; files are.
        let configured = test_of(
            r#"{"test":"jest --config jest.unit.js a.test.js && jest --config jest.all.js"}"#,
        );
        assert!(
            configured.contains("jest --config jest.all.js --ci"),
            "{configured}"
        );
        assert!(!configured.contains("a.test.js"), "{configured}");
        let files = test_of(r#"{"test":"jest a.test.js && jest -t slow b.test.js"}"#);
        assert!(files.contains("jest a.test.js b.test.js --ci"), "{files}");
    }

    #[test]
    fn jest_in_a_large_suite_runs_the_touched_directories_instead_of_the_scripts_files() {
        let tree = crate::plan::testutil::tree(&[
            (
                "package.json",
                r#"{"scripts":{"test":"jest --runInBand tests"},"devDependencies":{"jest":"^29"}}"#,
            ),
            ("tests/format/js/arrows/jsfmt.spec.js", ""),
            ("tests/format/js/arrows/curried.js", ""),
        ]);
        for n in 0..=selection::AUTO_FILES {
            let spec = tree.path().join(format!("tests/format/t{n}/jsfmt.spec.js"));
            std::fs::create_dir_all(spec.parent().unwrap()).unwrap();
            std::fs::write(spec, "").unwrap();
        }
        let touched = vec![
            "tests/format/js/arrows/__snapshots__/jsfmt.spec.js.snap".to_string(),
            "tests/format/js/arrows/curried.js".to_string(),
        ];
        let plan_for = |scope| {
            plan(&PlanContext {
                root: tree.path(),
                cutoff: None,
                ca_bundle: None,
                test_files: &touched,
                scope,
                case_timeout: std::time::Duration::from_secs(300),
            })
            .expect("a plan")
        };
        let selected = plan_for(crate::plan::TestScope::Auto);
        assert!(
            selected
                .test
                .render()
                .contains("jest --runInBand tests/format/js/arrows/ --ci"),
            "{}",
            selected.test.render()
        );
        assert!(
            selected
                .test_scope
                .starts_with("touched: tests/format/js/arrows/ (302 test files"),
            "{}",
            selected.test_scope
        );
        // The whole suite's command is the script's own, for validation's sampled check.
        assert_eq!(
            selected.whole_test.as_ref().map(TestCommand::render),
            Some(plan_for(crate::plan::TestScope::All).test.render())
        );
        let whole = plan_for(crate::plan::TestScope::All);
        assert!(whole.test.render().contains("jest --runInBand tests --ci"));
        assert_eq!(whole.test_scope, "all");
        assert_eq!(whole.whole_test, None);
    }

    #[test]
    fn mocha_runs_the_touched_directory_unless_its_config_names_the_spec() {
        let touched = vec!["test/acceptance/auth.js".to_string()];
        let plan_for = |files: &[(&str, &str)]| {
            let tree = crate::plan::testutil::tree(files);
            plan(&PlanContext {
                root: tree.path(),
                cutoff: None,
                ca_bundle: None,
                test_files: &touched,
                scope: crate::plan::TestScope::Touched,
                case_timeout: std::time::Duration::from_secs(300),
            })
            .expect("a plan")
        };
        let script = (
            "package.json",
            r#"{"scripts":{"test":"mocha --require test/support/env --check-leaks test/ test/acceptance/"},"devDependencies":{"mocha":"^10"}}"#,
        );
        let files = [script, ("test/app.js", ""), ("test/acceptance/auth.js", "")];
        let narrowed = plan_for(&files);
        assert!(
            narrowed.test.render().contains(
                "mocha --require test/support/env --check-leaks test/acceptance/ --reporter json"
            ),
            "{}",
            narrowed.test.render()
        );
        assert!(
            narrowed.whole_test.as_ref().is_some_and(|whole| whole
                .render()
                .contains("mocha --require test/support/env --check-leaks test/ test/acceptance/ --reporter json")),
            "{:?}",
            narrowed.whole_test
        );
        assert_eq!(
            narrowed.test_scope,
            "touched: test/acceptance/ (test_scope = \"touched\")"
        );
        let configured = plan_for(&[
            script,
            ("test/app.js", ""),
            ("test/acceptance/auth.js", ""),
            (".mocharc.yml", "spec: test/**/*.js\n"),
        ]);
        assert!(
            configured
                .test
                .render()
                .contains("test/ test/acceptance/ --reporter json"),
            "{}",
            configured.test.render()
        );
        assert_eq!(configured.test_scope, "all");
    }

    #[test]
    fn node_flags_before_a_runner_path_reach_the_runner() {
        let test_of = |scripts: &str| {
            node_plan(
                &[(
                    "package.json",
                    &format!(r#"{{"type":"module","scripts":{scripts},"devDependencies":{{"jest":"^29","mocha":"^10"}}}}"#),
                )],
                None,
            )
            .test
            .render()
        };
        // Jest on ES modules, as its documentation says to run it.
        let esm = test_of(
            r#"{"test":"node --experimental-vm-modules --no-warnings node_modules/jest/bin/jest.js --runInBand"}"#,
        );
        assert!(
            esm.contains("NODE_OPTIONS='--experimental-vm-modules --no-warnings'")
                && esm.contains("jest --runInBand --ci"),
            "{esm}"
        );
        // An assignment and the flags add up.
        let both = test_of(
            r#"{"test":"cross-env NODE_OPTIONS=--max-old-space-size=4096 node --experimental-vm-modules ./node_modules/.bin/jest"}"#,
        );
        assert!(
            both.contains("NODE_OPTIONS='--max-old-space-size=4096 --experimental-vm-modules'"),
            "{both}"
        );
        // mocha's `_mocha` binary is mocha.
        let mocha = test_of(r#"{"test":"node_modules/.bin/_mocha test/unit"}"#);
        assert!(
            mocha.contains("npx --no-install mocha test/unit"),
            "{mocha}"
        );
    }

    #[test]
    fn runs_that_stop_at_the_first_failure_are_not_kept() {
        let test_of = |files: &[(&str, &str)]| node_plan(files, None).test.render();
        assert_eq!(
            test_of(&[(
                "package.json",
                r#"{"scripts":{"test":"mocha --bail --check-leaks test/"}}"#
            )]),
            "CI=true npx --no-install mocha --check-leaks test/ --reporter json 2>&1"
        );
        // A config file that bails is overridden on the command line.
        assert_eq!(
            test_of(&[
                ("package.json", r#"{"scripts":{"test":"mocha -b test/"}}"#),
                (".mocharc.json", r#"{"bail": true, "spec": "test"}"#),
            ]),
            "CI=true npx --no-install mocha test/ --no-bail --reporter json 2>&1"
        );
        let jest = test_of(&[(
            "package.json",
            r#"{"scripts":{"test":"jest --bail 2 -o --runInBand src"}}"#,
        )]);
        assert!(jest.contains("jest --runInBand src --ci"), "{jest}");
        let vitest = test_of(&[(
            "package.json",
            r#"{"scripts":{"test":"vitest run --bail=1 --changedSince main tests"}}"#,
        )]);
        assert!(vitest.contains("vitest run tests --reporter"), "{vitest}");
    }

    #[test]
    fn yarn_pnpm_vitest_mocha_and_nvmrc() {
        let plan = node_plan(
            &[
                (
                    "package.json",
                    r#"{"scripts":{"test":"vitest"},"devDependencies":{"vitest":"1","typescript":"5"},"main":"dist/index.js","scripts2":{}}"#,
                ),
                ("yarn.lock", "# yarn lockfile v1\n"),
                (".nvmrc", "v16.20.0\n"),
            ],
            None,
        );
        assert_eq!(plan.name, "ts-yarn-vitest");
        assert_eq!(plan.language, "typescript");
        assert_eq!(
            plan.setup[1].render(),
            "yarn install --frozen-lockfile --non-interactive"
        );
        assert!(
            plan.test
                .render()
                .contains("yarn vitest run --reporter=json"),
            "{}",
            plan.test.render()
        );
        assert!(
            plan.version_reason
                .contains("Node 16 (official build 16.20.2) matches: .nvmrc says `v16.20.0`"),
            "{}",
            plan.version_reason
        );
        assert!(plan.image.tag.starts_with("kiln/node:16-"));

        let plan = node_plan(
            &[
                (
                    "package.json",
                    r#"{"scripts":{"test":"mocha -R spec 'test/**/*.js'","build":"tsc"},"main":"lib/index.js"}"#,
                ),
                ("pnpm-lock.yaml", "lockfileVersion: '6.0'\n"),
            ],
            None,
        );
        assert_eq!(plan.setup[1].render(), "npm install -g pnpm@8");
        assert_eq!(plan.setup[3].render(), "pnpm run build");
        assert_eq!(plan.rebuild, [Step::shell("pnpm run build")]);
        assert_eq!(
            plan.test.render(),
            "CI=true pnpm exec mocha 'test/**/*.js' --reporter json 2>&1"
        );
        assert_eq!(plan.parser, "mocha-json");
    }

    #[test]
    fn unknown_runners_fall_back_to_npm_test_as_tap() {
        let plan = node_plan(
            &[("package.json", r#"{"scripts":{"test":"tape test/*.js"}}"#)],
            None,
        );
        assert_eq!(plan.test.render(), "CI=true npm test 2>&1");
        assert_eq!(plan.parser, "tap");
        assert!(plan.version_reason.contains("read as TAP"));
        assert!(plan_of(super::plan, &[("README", "")], None).is_none());
    }
}
