//! Repair rules of Node plans: OpenSSL 3 and old webpack, a cut-off that admits no version, a
//! native addon that cannot be built, and require() of an ES module with top-level await.

use crate::plan::RepairContext;
use crate::repair::{Failed, Failing, Phase, Repair, Rule, Target};
use crate::steps::{NodeInstall, Step, TestCommand};

/// Node's switch that turns require() of ES modules off.
const NO_REQUIRE_MODULE: &str = "--no-experimental-require-module";

/// The failing step as a Node dependency install, when it is one.
fn node_install<'a>(failed: &'a Failed<'_>) -> Option<&'a NodeInstall> {
    match failed.step()? {
        Step::Node(install) => Some(install),
        _ => None,
    }
}

/// The test command with require(esm) switched off: added to the command's own
/// `NODE_OPTIONS` (an assignment for the runner overrides an exported one), else assigned
/// after whatever the environment holds; `None` when it is off already.
fn without_require_module(command: &TestCommand) -> Option<TestCommand> {
    let set = |text: &String| text.contains(NO_REQUIRE_MODULE);
    if set(&command.run) || command.env.iter().any(|(_, value)| set(value)) {
        return None;
    }
    let mut command = command.clone();
    match command
        .env
        .iter_mut()
        .find(|(name, _)| name == "NODE_OPTIONS")
    {
        Some((_, value)) => {
            // The value is a shell word: its quotes go, the flag joins it in single quotes.
            let inner = value
                .strip_prefix(['\'', '"'])
                .and_then(|v| v.strip_suffix(['\'', '"']))
                .unwrap_or(value);
            *value = format!("'{inner} {NO_REQUIRE_MODULE}'");
        }
        None => command.env.push((
            "NODE_OPTIONS".into(),
            format!("\"${{NODE_OPTIONS:+$NODE_OPTIONS }}{NO_REQUIRE_MODULE}\""),
        )),
    }
    Some(command)
}

/// The rules of Node plans, in the order they are tried.
pub static RULES: &[Rule] = &[
    Rule {
        name: "node-legacy-openssl",
        phase: Phase::Setup,
        target: Target::Any,
        signature: r"ERR_OSSL_EVP_UNSUPPORTED|digital envelope routines::unsupported",
        description: "webpack 4 and other tools hash with MD4, which OpenSSL 3 (Node 17 on) refuses: NODE_OPTIONS=--openssl-legacy-provider",
        // Older Node has OpenSSL 1.1 and refuses to start with the flag.
        repair: |_, _, cx: &RepairContext| {
            (cx.node_major >= 17)
                .then(|| Repair::Env("NODE_OPTIONS".into(), "--openssl-legacy-provider".into()))
        },
    },
    Rule {
        name: "node-cutoff-admits-nothing",
        phase: Phase::Setup,
        target: Target::NodeInstall,
        signature: r"ETARGET|ENOVERSIONS|No matching version found for|No versions available for|notarget",
        description: "no published version of a dependency satisfies its range as of the cut-off date (a range newer than the registry's dates, or a registry that reports later publish times): npm install without --before, the ranges as written",
        repair: |f, _, _| {
            let install = node_install(f)?;
            install.cutoff.as_ref()?;
            Some(Repair::DropCutoff(Step::Node(NodeInstall {
                cutoff: None,
                ..install.clone()
            })))
        },
    },
    Rule {
        name: "node-native-addon-without-scripts",
        phase: Phase::Setup,
        target: Target::NodeInstall,
        signature: r"gyp ERR!|node-pre-gyp ERR!|prebuild-install (?:warn|WARN|ERR)|Failed at the \S+ install script|command failed\s*\n.*node-gyp",
        description: "a native addon's install script failed (its prebuilt binary is downloaded from a host the build cannot reach, or node-gyp cannot build it): the dependencies are installed again without install scripts, so the tests that do not load the addon run",
        repair: |f, _, _| {
            let install = node_install(f)?;
            (!install.ignore_scripts).then(|| {
                Repair::Replace(vec![Step::Node(NodeInstall {
                    ignore_scripts: true,
                    ..install.clone()
                })])
            })
        },
    },
    Rule {
        name: "node-require-async-module",
        phase: Phase::Tests,
        target: Target::Any,
        signature: r"ERR_REQUIRE_ASYNC_MODULE",
        description: "Node 20.19 and 22.12 on let require() load ES modules, and one with top-level await then fails where earlier Node made the caller fall back to import() (jest loading an ESM config): the tests run with --no-experimental-require-module",
        repair: |f, _, _| match f.failing {
            Failing::Tests(command) => without_require_module(command).map(Repair::Tests),
            Failing::Step(_) => None,
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::testutil::{step_repair, test_repair};
    use crate::steps::NodeManager;

    fn rules() -> Vec<&'static Rule> {
        RULES.iter().collect()
    }

    #[test]
    fn old_webpack_on_openssl_3_gets_the_legacy_provider() {
        let (name, repair) = step_repair(
            &rules(),
            &Step::shell("npm run build"),
            "Error: error:0308010C:digital envelope routines::unsupported",
        )
        .unwrap();
        assert_eq!(
            (name, repair),
            (
                "node-legacy-openssl",
                Repair::Env("NODE_OPTIONS".into(), "--openssl-legacy-provider".into())
            )
        );
    }

    #[test]
    fn an_npm_cutoff_that_admits_nothing_is_dropped() {
        let log = "npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for left-pad@^9.0.0.\n";
        let dated = Step::Node(NodeInstall {
            cutoff: Some("2019-06-01T00:00:00Z".into()),
            ..NodeInstall::new(NodeManager::Npm)
        });
        assert_eq!(dated.render(), "npm install --before 2019-06-01T00:00:00Z");
        let (name, repair) = step_repair(&rules(), &dated, log).unwrap();
        assert_eq!(name, "node-cutoff-admits-nothing");
        let Repair::DropCutoff(step) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(step.render(), "npm install");
        // Without a cut-off there is nothing to drop.
        assert!(step_repair(&rules(), &step, log).is_none());
    }

    #[test]
    fn a_project_es_module_with_top_level_await_runs_without_require_esm() {
        // Captured from prettier at b26f56bd31 under Debian trixie's Node 20.19 (jest 29
        // loading jest.config.js, an ES module with top-level await).
        let log = "$ CI=true NODE_OPTIONS=--experimental-vm-modules yarn jest --runInBand --ci --json --outputFile=/tmp/kiln-jest.json\nError [ERR_REQUIRE_ASYNC_MODULE]: require() cannot be used on an ESM graph with top-level await. Use import() instead. To see where the top-level await comes from, use --experimental-print-required-tla.\n    at ModuleJobSync.runSync (node:internal/modules/esm/module_job:384:13)\n    at requireOrImportModule (/testbed/node_modules/jest-util/build/index.js:881:28)\n";
        let command = TestCommand {
            env: vec![
                ("CI".into(), "true".into()),
                ("NODE_OPTIONS".into(), "--experimental-vm-modules".into()),
            ],
            run: "yarn jest --runInBand".into(),
            report: Some("/tmp/kiln-jest.json".into()),
            prelude: Vec::new(),
        };
        let (name, repair) = test_repair(&rules(), &command, log).unwrap();
        assert_eq!(name, "node-require-async-module");
        let Repair::Tests(repaired) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            repaired.render(),
            "rm -f /tmp/kiln-jest.json; CI=true NODE_OPTIONS='--experimental-vm-modules --no-experimental-require-module' yarn jest --runInBand; rc=$?; echo; cat /tmp/kiln-jest.json 2>/dev/null; exit $rc"
        );
        assert_eq!(
            without_require_module(&TestCommand::plain("npx jest"))
                .map(|c| c.render())
                .as_deref(),
            Some(
                "NODE_OPTIONS=\"${NODE_OPTIONS:+$NODE_OPTIONS }--no-experimental-require-module\" npx jest"
            )
        );
        let quoted = TestCommand {
            env: vec![("NODE_OPTIONS".into(), "\"--a --b\"".into())],
            run: "jest".into(),
            report: None,
            prelude: Vec::new(),
        };
        assert_eq!(
            without_require_module(&quoted)
                .map(|c| c.render())
                .as_deref(),
            Some("NODE_OPTIONS='--a --b --no-experimental-require-module' jest")
        );
        // Tried once: the repaired command is not repaired again.
        assert!(test_repair(&rules(), &repaired, log).is_none());
    }

    #[test]
    fn a_native_addon_that_cannot_build_is_installed_without_scripts() {
        // npm 9 on Node 18, re2's install script failing to fetch its prebuilt binary and to
        // build it (no Node headers: nodejs.org unreachable).
        let log = "npm ERR! code 1\nnpm ERR! path /testbed/node_modules/re2\nnpm ERR! command failed\nnpm ERR! command sh -c install-from-cache --artifact build/Release/re2.node --host-var RE2_DOWNLOAD_MIRROR --skip-path-var RE2_DOWNLOAD_SKIP_PATH --skip-ver-var RE2_DOWNLOAD_SKIP_VER || node-gyp -j max rebuild\nnpm ERR! gyp ERR! stack Error: 403 response downloading https://nodejs.org/download/release/v18.19.0/node-v18.19.0-headers.tar.gz\n";
        let plain = Step::Node(NodeInstall::new(NodeManager::Npm));
        let (name, repair) = step_repair(&rules(), &plain, log).unwrap();
        let Repair::Replace(steps) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            (name, steps[0].render().as_str()),
            (
                "node-native-addon-without-scripts",
                "npm install --ignore-scripts"
            )
        );
        let locked = Step::Node(NodeInstall::new(NodeManager::NpmLocked));
        let (_, repair) = step_repair(&rules(), &locked, log).unwrap();
        let Repair::Replace(steps) = repair else {
            panic!("{repair:?}")
        };
        assert_eq!(
            steps[0].render(),
            "npm ci --ignore-scripts || { echo '[kiln] package-lock.json does not match package.json; npm install --ignore-scripts'; npm install --ignore-scripts; }"
        );
        // Tried once: an install that already skips scripts is not repaired again.
        assert!(step_repair(&rules(), &steps[0], log).is_none());
    }
}
