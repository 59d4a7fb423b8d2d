//! The Node/TypeScript plan: `package.json` decides the Node version (with `.nvmrc` and
//! `.node-version`), the lockfile decides the package manager, and the test script and
//! dependencies decide the runner, which is asked for a structured report where it has one.

use std::path::Path;

use serde_json::Value;

use crate::images;
use crate::plan::{GIT_SETUP, Plan, PlanContext, read, shell_quote};

pub mod version;

pub use version::admits;

/// How the repository installs its dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageManager {
    /// `package-lock.json` or `npm-shrinkwrap.json`: `npm ci`.
    NpmLocked,
    /// No lockfile: `npm install`, with `--before <cut-off>`.
    NpmUnlocked,
    /// `yarn.lock`; `berry` for a Yarn 2+ lockfile, with the version from `packageManager`.
    Yarn {
        /// The lockfile is Yarn 2+ (`__metadata:`).
        berry: bool,
        /// `packageManager: yarn@<version>`, when declared.
        version: Option<String>,
        /// `.yarnrc.yml` names a committed Yarn release (`yarnPath`).
        yarn_path: bool,
    },
    /// `pnpm-lock.yaml`, with the pnpm version to install.
    Pnpm {
        /// `pnpm@<version or major>` for `npm install -g`.
        version: String,
    },
}

/// The test runner and the way it is asked for a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runner {
    /// Jest, JSON report.
    Jest,
    /// Create React App's `react-scripts test`, which is Jest.
    ReactScripts,
    /// Vitest, JSON report.
    Vitest,
    /// Mocha, JSON reporter.
    Mocha,
    /// `node --test`.
    NodeTest,
    /// ava with its TAP reporter.
    Ava,
    /// Jasmine (3 and later), with kiln's TAP reporter ([`JASMINE_REPORTER`]): its own
    /// reporter prints a dot per spec and names only the failures.
    Jasmine,
    /// Whatever `npm test` runs, read as TAP (tape, node-tap and many small harnesses print it).
    Script,
}

/// What `package.json` and its neighbours say.
#[derive(Debug, Clone)]
pub struct NodeProject {
    /// The package manager and lockfile.
    pub manager: PackageManager,
    /// The test runner.
    pub runner: Runner,
    /// Arguments of the runner taken from the `test` script (watch flags and reporters removed).
    pub runner_args: Vec<String>,
    /// Environment assignments that prefix the runner in the `test` script (`NODE_ENV=test`).
    pub runner_env: Vec<String>,
    /// The Node release chosen.
    pub node: &'static version::Release,
    /// Why that major.
    pub node_reason: String,
    /// `scripts.build`, run before the tests when the package's entry point is a build output
    /// missing from the checkout.
    pub build_script: bool,
    /// The package is written in TypeScript (`typescript` dependency or `tsconfig.json`).
    pub typescript: bool,
}

/// Reads `package.json` at the root. `None` when it is missing or not a JSON object.
#[must_use]
pub fn detect(root: &Path, cutoff: Option<&str>) -> Option<NodeProject> {
    let manifest: Value = serde_json::from_str(&read(root, "package.json")?).ok()?;
    let manifest = manifest.as_object()?;
    let str_at = |path: &[&str]| -> Option<String> {
        let mut value = manifest.get(path[0])?;
        for key in &path[1..] {
            value = value.get(key)?;
        }
        value.as_str().map(str::to_string)
    };
    let mut deps: Vec<String> = Vec::new();
    for section in ["dependencies", "devDependencies", "peerDependencies"] {
        if let Some(table) = manifest.get(section).and_then(Value::as_object) {
            deps.extend(table.keys().cloned());
        }
    }
    let has = |name: &str| deps.iter().any(|d| d == name);
    let package_manager = str_at(&["packageManager"]);
    let pm_version = |tool: &str| {
        package_manager
            .as_deref()
            .and_then(|pm| pm.strip_prefix(&format!("{tool}@")))
            .map(|v| v.split('+').next().unwrap_or(v).to_string())
    };
    let manager = if root.join("pnpm-lock.yaml").is_file() {
        let lock = read(root, "pnpm-lock.yaml").unwrap_or_default();
        let version = pm_version("pnpm").unwrap_or_else(|| pnpm_for_lockfile(&lock).to_string());
        PackageManager::Pnpm { version }
    } else if root.join("yarn.lock").is_file() {
        let lock = read(root, "yarn.lock").unwrap_or_default();
        PackageManager::Yarn {
            berry: lock.contains("__metadata:"),
            version: pm_version("yarn"),
            yarn_path: read(root, ".yarnrc.yml").is_some_and(|t| t.contains("yarnPath:")),
        }
    } else if root.join("package-lock.json").is_file() || root.join("npm-shrinkwrap.json").is_file()
    {
        PackageManager::NpmLocked
    } else {
        PackageManager::NpmUnlocked
    };
    let script = test_script(manifest);
    let (runner, mut runner_args, runner_env) = runner_of(&script, &has);
    // Stopping at the first failure would leave the tests after it unrun, and unrun tests
    // before the fix read as tests the fix added. The script's own `--bail` is dropped
    // (`clean_args`); mocha's config files can set it too, and `--no-bail` (mocha 6 and later,
    // the versions that read those files) overrides them.
    if runner == Runner::Mocha && mocha_config_bails(root, manifest) {
        runner_args.push("--no-bail".into());
    }
    let engines = str_at(&["engines", "node"]);
    let (nvmrc, node_version_file) = (read(root, ".nvmrc"), read(root, ".node-version"));
    let lockfile_version = ["package-lock.json", "npm-shrinkwrap.json"]
        .iter()
        .find_map(|file| read(root, file))
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|lock| lock.get("lockfileVersion")?.as_u64());
    let (node, node_reason) = version::choose(
        &version::Declared {
            engines: engines.as_deref(),
            nvmrc: nvmrc.as_deref(),
            node_version_file: node_version_file.as_deref(),
            lockfile_version,
        },
        cutoff,
    );
    // A package whose entry point is a build output (`dist/index.js`) that is not committed
    // has tests that usually import that output, so it is built first.
    let entry_missing = ["main", "module", "types"]
        .iter()
        .filter_map(|key| str_at(&[key]))
        .any(|entry| !root.join(entry.trim_start_matches("./")).exists());
    let build_script = str_at(&["scripts", "build"]).is_some() && entry_missing;
    Some(NodeProject {
        manager,
        runner,
        runner_args,
        runner_env,
        node,
        node_reason,
        build_script,
        typescript: has("typescript") || root.join("tsconfig.json").is_file(),
    })
}

/// Whether a mocha config file (`.mocharc.*`, the `mocha` key of `package.json`, the legacy
/// `test/mocha.opts`) mentions `bail`.
fn mocha_config_bails(root: &Path, manifest: &serde_json::Map<String, Value>) -> bool {
    let in_files = [
        ".mocharc.js",
        ".mocharc.cjs",
        ".mocharc.mjs",
        ".mocharc.json",
        ".mocharc.jsonc",
        ".mocharc.yaml",
        ".mocharc.yml",
        "test/mocha.opts",
    ]
    .iter()
    .filter_map(|name| read(root, name))
    .any(|text| text.contains("bail") || text.lines().any(|l| l.trim() == "-b"));
    in_files
        || manifest
            .get("mocha")
            .and_then(Value::as_object)
            .is_some_and(|config| config.contains_key("bail"))
}

/// The pnpm major that writes a lockfile of this `lockfileVersion`.
fn pnpm_for_lockfile(lock: &str) -> &'static str {
    let version = lock
        .lines()
        .find_map(|l| l.strip_prefix("lockfileVersion:"))
        .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        .unwrap_or_default();
    if version.starts_with('5') {
        "7"
    } else if version.starts_with('6') {
        "8"
    } else {
        "9"
    }
}

/// Finds the runner in the `test` script, then in the dependencies. Returns the runner, the
/// arguments the script gives it and the environment assignments before it.
fn runner_of(script: &str, has: &dyn Fn(&str) -> bool) -> (Runner, Vec<String>, Vec<String>) {
    const BINARIES: &[(&str, Runner)] = &[
        ("vitest", Runner::Vitest),
        ("jest", Runner::Jest),
        ("react-scripts", Runner::ReactScripts),
        ("mocha", Runner::Mocha),
        ("ava", Runner::Ava),
        ("jasmine", Runner::Jasmine),
    ];
    // The runner of each command of the script, with its arguments and environment.
    let mut found: Vec<(Runner, Vec<String>, Vec<String>)> = Vec::new();
    for segment in script.split("&&").flat_map(|s| s.split(';')) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            if *word == "node" && words.get(i + 1) == Some(&"--test") {
                found.push((
                    Runner::NodeTest,
                    words[i + 2..].iter().map(|w| (*w).to_string()).collect(),
                    env_prefix(&words[..i]),
                ));
                break;
            }
            if let Some((_, runner)) = BINARIES.iter().find(|(bin, _)| bin == word) {
                let args = &words[i + 1..];
                if *runner == Runner::ReactScripts && args.first() != Some(&"test") {
                    continue;
                }
                found.push((*runner, clean_args(*runner, args), env_prefix(&words[..i])));
                break;
            }
        }
    }
    // Several commands of the first runner (`mocha a.js && mocha b/*.js`, as scripts split by
    // suite give) become one run over all their test files: the flags come from the first, the
    // files and patterns of the others are added.
    if let Some((runner, mut args, env)) = found.first().cloned() {
        for (_, more, _) in found.iter().skip(1).filter(|(r, _, _)| *r == runner) {
            for arg in more {
                if !arg.starts_with('-') && !args.contains(arg) {
                    args.push(arg.clone());
                }
            }
        }
        return (runner, args, env);
    }
    let from_deps = [
        ("vitest", Runner::Vitest),
        ("jest", Runner::Jest),
        ("react-scripts", Runner::ReactScripts),
        ("mocha", Runner::Mocha),
        ("ava", Runner::Ava),
        ("jasmine", Runner::Jasmine),
    ]
    .iter()
    .find(|(dep, _)| has(dep))
    .map_or(Runner::Script, |(_, runner)| *runner);
    // A test script that the runner detection did not recognise may still be the way the
    // project runs a dependency-detected runner (through a wrapper script); the plain
    // runner with its defaults is the better bet for a structured report.
    (from_deps, Vec::new(), Vec::new())
}

/// The `test` script with the package scripts it runs written out: `npm run X`, `yarn X`,
/// `pnpm run X` and npm-run-all's `npm-run-all` / `run-s` / `run-p` patterns (`test:*` matches
/// the names one `:` level down, `test:**` every level) give way to those scripts' commands,
/// so that the runner behind a script that only delegates is found.
fn test_script(manifest: &serde_json::Map<String, Value>) -> String {
    let empty = serde_json::Map::new();
    let scripts = manifest
        .get("scripts")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let text = scripts
        .get("test")
        .and_then(Value::as_str)
        .unwrap_or_default();
    expand_script(text, scripts, &mut vec!["test".to_string()], 0)
}

fn expand_script(
    text: &str,
    scripts: &serde_json::Map<String, Value>,
    seen: &mut Vec<String>,
    depth: usize,
) -> String {
    let mut out: Vec<String> = Vec::new();
    for segment in text.split("&&").flat_map(|s| s.split(';')) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let Some(names) = delegated_scripts(&words, scripts).filter(|_| depth < 4) else {
            out.push(segment.trim().to_string());
            continue;
        };
        for name in names {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            if let Some(body) = scripts.get(&name).and_then(Value::as_str) {
                out.push(expand_script(body, scripts, seen, depth + 1));
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out.join(" && ")
}

/// The package scripts a command runs, when it only runs package scripts.
fn delegated_scripts(
    words: &[&str],
    scripts: &serde_json::Map<String, Value>,
) -> Option<Vec<String>> {
    let (tool, rest) = words.split_first()?;
    let rest: Vec<&str> = rest.iter().copied().take_while(|w| *w != "--").collect();
    match *tool {
        "npm" | "yarn" | "pnpm" => {
            let name = match rest.as_slice() {
                ["run" | "run-script", name, ..] => *name,
                [name, ..] if *tool != "npm" && !name.starts_with('-') => *name,
                _ => return None,
            };
            scripts.contains_key(name).then(|| vec![name.to_string()])
        }
        "npm-run-all" | "run-s" | "run-p" => Some(
            rest.iter()
                .filter(|w| !w.starts_with('-'))
                .flat_map(|pattern| {
                    scripts
                        .keys()
                        .filter(|name| script_pattern_matches(pattern, name))
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .collect(),
        ),
        _ => None,
    }
}

/// npm-run-all's patterns: `*` within one `:`-separated part of a script name, `**` across
/// parts; anything else literally.
fn script_pattern_matches(pattern: &str, name: &str) -> bool {
    let pattern = pattern.trim_matches(['"', '\'']);
    let (p, n): (Vec<&str>, Vec<&str>) = (pattern.split(':').collect(), name.split(':').collect());
    if p.last() == Some(&"**") {
        return n.len() >= p.len()
            && p[..p.len() - 1]
                .iter()
                .zip(&n)
                .all(|(p, n)| crate::plan::glob_match(p, n));
    }
    p.len() == n.len() && p.iter().zip(&n).all(|(p, n)| crate::plan::glob_match(p, n))
}

/// `NAME=value` words before the runner, `cross-env` dropped.
fn env_prefix(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .filter(|w| w.contains('=') && !w.starts_with('-'))
        .map(|w| (*w).to_string())
        .collect()
}

/// The script's arguments minus those that would block (watch mode), replace kiln's reporter,
/// stop at the first failure (`--bail`: the tests after it would go unrun) or pick tests by
/// what git says changed (jest's `--onlyChanged`).
fn clean_args(runner: Runner, args: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    let mut after_bail = false;
    for (i, arg) in args.iter().enumerate() {
        if skip_value {
            skip_value = false;
            continue;
        }
        // `--bail 2`: the count goes with the flag.
        if std::mem::take(&mut after_bail) && arg.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Redirections, pipes and further commands end the runner's arguments.
        if arg.starts_with(['|', '>', '<']) || *arg == "||" {
            break;
        }
        let name = arg.split('=').next().unwrap_or(arg);
        let drops_value = matches!(
            name,
            "--reporter" | "-R" | "--outputFile" | "--config-env" | "--changedSince"
        ) && !arg.contains('=');
        if drops_value {
            skip_value = true;
            continue;
        }
        let short_bail = *arg == "-b" && matches!(runner, Runner::Jest | Runner::Mocha);
        if name == "--bail" || short_bail {
            after_bail = !arg.contains('=');
            continue;
        }
        if matches!(
            name,
            "--watch"
                | "-w"
                | "--watchAll"
                | "--reporter"
                | "-R"
                | "--json"
                | "--outputFile"
                | "--coverage"
                | "--silent"
                | "--onlyChanged"
                | "--lastCommit"
                | "--changedSince"
        ) {
            continue;
        }
        if *arg == "-o" && runner == Runner::Jest {
            continue;
        }
        if i == 0 && matches!((runner, *arg), (Runner::Vitest, "run" | "watch" | "dev")) {
            continue;
        }
        if i == 0 && runner == Runner::ReactScripts && *arg == "test" {
            continue;
        }
        out.push((*arg).to_string());
    }
    out
}

/// Setup commands that install the dependencies, and what fixes their versions.
fn install(manager: &PackageManager, cutoff: Option<&str>) -> (Vec<String>, String, bool) {
    match manager {
        PackageManager::NpmLocked => (
            // A lockfile out of step with package.json makes `npm ci` refuse; `npm install`
            // then keeps every version the lockfile still allows.
            vec!["npm ci || { echo '[kiln] package-lock.json does not match package.json; npm install'; npm install; }".into()],
            "package-lock.json pins every dependency (npm ci)".into(),
            false,
        ),
        PackageManager::NpmUnlocked => match cutoff {
            Some(cutoff) => (
                vec![format!("npm install --before {}", shell_quote(cutoff))],
                format!("no lockfile: npm install --before {cutoff}"),
                true,
            ),
            None => (
                vec!["npm install".into()],
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
                setup.push(format!(
                    "npm install -g --force @yarnpkg/cli-dist@{}",
                    shell_quote(&version)
                ));
            }
            let command = if *berry {
                "yarn install --immutable"
            } else {
                "yarn install --frozen-lockfile --non-interactive"
            };
            setup.push(command.to_string());
            (setup, "yarn.lock pins every dependency".into(), false)
        }
        PackageManager::Pnpm { version } => (
            vec![
                format!("npm install -g pnpm@{}", shell_quote(version)),
                "pnpm install --frozen-lockfile".into(),
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

/// The setup command that writes [`JASMINE_REPORTER`] into the image.
fn jasmine_reporter_setup() -> String {
    format!(
        "mkdir -p /opt/kiln && cat > {JASMINE_REPORTER_PATH} <<'KILN_REPORTER_EOF'\n{JASMINE_REPORTER}KILN_REPORTER_EOF"
    )
}

/// The test command and its parser.
fn test_command(project: &NodeProject) -> (String, &'static str) {
    let exec = exec_prefix(&project.manager);
    // The script's words are shell words already (npm runs scripts with sh), so they are
    // passed on as written, quotes included.
    let mut env: String = project.runner_env.iter().map(|e| format!("{e} ")).collect();
    env.insert_str(0, "CI=true ");
    let args: String = project
        .runner_args
        .iter()
        .map(|a| format!(" {a}"))
        .collect();
    // Reports written to a file are removed first: the image keeps the baseline's, and a later
    // run that crashes before writing its own must not be read as the baseline again.
    let report = |file: &str, run: String| {
        format!("rm -f {file}; {run}; rc=$?; echo; cat {file} 2>/dev/null; exit $rc")
    };
    match project.runner {
        Runner::Jest => (
            report(
                "/tmp/kiln-jest.json",
                format!("{env}{exec} jest{args} --ci --json --outputFile=/tmp/kiln-jest.json 2>&1"),
            ),
            "jest-json",
        ),
        Runner::ReactScripts => (
            report(
                "/tmp/kiln-jest.json",
                format!(
                    "{env}{exec} react-scripts test{args} --watchAll=false --ci --json --outputFile=/tmp/kiln-jest.json 2>&1"
                ),
            ),
            "jest-json",
        ),
        Runner::Vitest => (
            report(
                "/tmp/kiln-vitest.json",
                format!(
                    "{env}{exec} vitest run{args} --reporter=json --outputFile=/tmp/kiln-vitest.json 2>&1"
                ),
            ),
            "vitest-json",
        ),
        Runner::Mocha => (
            format!("{env}{exec} mocha{args} --reporter json 2>&1"),
            "mocha-json",
        ),
        Runner::NodeTest => (format!("{env}node --test{args} 2>&1"), "node-test"),
        Runner::Ava => (format!("{env}{exec} ava{args} --tap 2>&1"), "tap"),
        Runner::Jasmine => (
            format!("{env}{exec} jasmine{args} --reporter={JASMINE_REPORTER_PATH} 2>&1"),
            "tap",
        ),
        Runner::Script => {
            let run = match project.manager {
                PackageManager::Yarn { .. } => "yarn test",
                PackageManager::Pnpm { .. } => "pnpm test",
                _ => "npm test",
            };
            (format!("CI=true {run} 2>&1"), "tap")
        }
    }
}

/// The Node plan, when the root holds a `package.json`.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root, cx.cutoff)?;
    let (mut setup, resolution, cutoff_applied) = install(&project.manager, cx.cutoff);
    setup.insert(0, GIT_SETUP.to_string());
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
        setup.push(build.to_string());
        rebuild.push(build.to_string());
        optional.push(build.to_string());
    }
    if project.runner == Runner::Jasmine {
        setup.push(jasmine_reporter_setup());
    }
    let (test, parser) = test_command(&project);
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
        image: images::node_image(project.node, cx.ca_bundle),
        version_reason,
        setup,
        rebuild,
        test,
        test_scope: "all".into(),
        parser,
        resolution,
        cutoff: if cutoff_applied {
            cx.cutoff.map(str::to_string)
        } else {
            None
        },
        repair: crate::repair::RepairContext {
            optional,
            node_major: project.node.major,
            ..crate::repair::RepairContext::of("node")
        },
    })
}

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
            plan.test.contains(
                "npx --no-install jasmine --config=jasmine.json --reporter=/opt/kiln/jasmine-tap.cjs 2>&1"
            ),
            "{}",
            plan.test
        );
        // The reporter is written by a setup command (so the image and its Dockerfile have it),
        // byte for byte as kiln holds it.
        let writer = plan
            .setup
            .iter()
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
        assert!(plan.setup[1].starts_with("npm ci"), "{:?}", plan.setup);
        assert!(
            plan.test.contains(
                "CI=true NODE_ENV=test npx --no-install jest --config jest.config.js --ci --json"
            ),
            "{}",
            plan.test
        );
        assert!(plan.test.starts_with("rm -f /tmp/kiln-jest.json;"));
        assert!(plan.test.ends_with("exit $rc"));
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

    #[test]
    fn no_lockfile_installs_before_the_cutoff() {
        let plan = node_plan(
            &[(
                "package.json",
                r#"{"scripts":{"test":"node --test test/"},"engines":{"node":">=20"}}"#,
            )],
            Some("2024-05-01T10:00:00Z"),
        );
        assert_eq!(plan.setup[1], "npm install --before 2024-05-01T10:00:00Z");
        assert_eq!(plan.cutoff.as_deref(), Some("2024-05-01T10:00:00Z"));
        assert_eq!(plan.test, "CI=true node --test test/ 2>&1");
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
    fn runs_that_stop_at_the_first_failure_are_not_kept() {
        let test_of = |files: &[(&str, &str)]| node_plan(files, None).test;
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
            plan.setup[1],
            "yarn install --frozen-lockfile --non-interactive"
        );
        assert!(
            plan.test.contains("yarn vitest run --reporter=json"),
            "{}",
            plan.test
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
        assert_eq!(plan.setup[1], "npm install -g pnpm@8");
        assert_eq!(plan.setup[3], "pnpm run build");
        assert_eq!(plan.rebuild, ["pnpm run build"]);
        assert_eq!(
            plan.test,
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
        assert_eq!(plan.test, "CI=true npm test 2>&1");
        assert_eq!(plan.parser, "tap");
        assert!(plan.version_reason.contains("read as TAP"));
        assert!(plan_of(super::plan, &[("README", "")], None).is_none());
    }
}
