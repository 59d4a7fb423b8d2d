//! What a Node project's files say: the package manager (from the lockfile), the test runner
//! with its arguments and environment (from the `test` script, with the package scripts it
//! delegates to written out, else from the dependencies), the Node release, and whether its
//! entry point must be built first.

use std::path::Path;

use serde_json::Value;

use crate::plan::{glob_match, read};

use super::version;

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
    /// Environment assignments that prefix the runner in the `test` script (`NODE_ENV=test`),
    /// as the variable's name and the shell word of its value, as written.
    pub runner_env: Vec<(String, String)>,
    /// The Node release chosen.
    pub node: &'static version::Release,
    /// Why that major.
    pub node_reason: String,
    /// `scripts.build`, run before the tests when the package's entry point is a build output
    /// missing from the checkout.
    pub build_script: bool,
    /// The package is written in TypeScript (`typescript` dependency or `tsconfig.json`).
    pub typescript: bool,
    /// A mocha run whose config may name spec files of its own (a `spec` key; the legacy
    /// `mocha.opts` lists them as lines): mocha adds the files on its command line to those
    /// (mochajs/mocha#5412), so a command line cannot narrow the run.
    pub mocha_config_spec: bool,
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
    let mocha = (runner == Runner::Mocha).then(|| MochaConfig::read(root, manifest));
    if mocha.as_ref().is_some_and(|m| m.bails) {
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
        mocha_config_spec: mocha.is_some_and(|m| m.names_spec),
    })
}

/// What mocha's config (`.mocharc.*`, the legacy `test/mocha.opts`, the `mocha` key of
/// `package.json`) says that kiln's command must answer.
struct MochaConfig {
    /// It mentions `bail`.
    bails: bool,
    /// It may name spec files ([`NodeProject::mocha_config_spec`]).
    names_spec: bool,
}

impl MochaConfig {
    fn read(root: &Path, manifest: &serde_json::Map<String, Value>) -> Self {
        let files: Vec<String> = [
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
        .collect();
        let key = |name: &str| {
            manifest
                .get("mocha")
                .and_then(Value::as_object)
                .is_some_and(|config| config.contains_key(name))
        };
        Self {
            bails: key("bail")
                || files
                    .iter()
                    .any(|text| text.contains("bail") || text.lines().any(|l| l.trim() == "-b")),
            names_spec: key("spec")
                || root.join("test/mocha.opts").is_file()
                || files.iter().any(|t| t.contains("spec")),
        }
    }
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

/// A runner found in a script: the runner, its arguments and the environment assigned for it.
type Found = (Runner, Vec<String>, Vec<(String, String)>);

/// Finds the runner in the `test` script, then in the dependencies. Returns the runner, the
/// arguments the script gives it and the environment assignments before it.
fn runner_of(script: &str, has: &dyn Fn(&str) -> bool) -> Found {
    const BINARIES: &[(&str, Runner)] = &[
        ("vitest", Runner::Vitest),
        ("jest", Runner::Jest),
        ("react-scripts", Runner::ReactScripts),
        ("mocha", Runner::Mocha),
        ("ava", Runner::Ava),
        ("jasmine", Runner::Jasmine),
    ];
    // The runner of each command of the script, with its arguments and environment.
    let mut found: Vec<Found> = Vec::new();
    for segment in script.split("&&").flat_map(|s| s.split(';')) {
        let words: Vec<&str> = segment.split_whitespace().collect();
        for (i, word) in words.iter().enumerate() {
            if *word == "node" && words.get(i + 1) == Some(&"--test") {
                found.push((
                    Runner::NodeTest,
                    clean_args(Runner::NodeTest, &words[i + 2..]),
                    env_prefix(&words[..i]),
                ));
                break;
            }
            let Some(runner) = runner_named(word, BINARIES) else {
                continue;
            };
            let args = &words[i + 1..];
            if runner == Runner::ReactScripts && args.first() != Some(&"test") {
                continue;
            }
            let mut env = env_prefix(&words[..i]);
            node_options(&words[..i], &mut env);
            found.push((runner, clean_args(runner, args), env));
            break;
        }
    }
    // Several commands of the first runner: a command that runs the whole suite (no files, no
    // pattern) is the one kept, with its own environment (`jest test/tz.test && jest`, as
    // scripts that run one file under several time zones and then everything give); otherwise
    // they become one run over all their test files (`mocha a.js && mocha b/*.js`, as scripts
    // split by suite give): the flags come from the first, the files of the others are added.
    if let Some((runner, mut args, env)) = found.first().cloned() {
        let same: Vec<&Found> = found.iter().filter(|(r, _, _)| *r == runner).collect();
        if same.len() > 1
            && let Some(whole) = same.iter().find(|(_, args, _)| !selects_tests(args))
        {
            return (*whole).clone();
        }
        for (_, more, _) in same.iter().skip(1) {
            for arg in positionals(more) {
                if !args.contains(arg) {
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
                .all(|(p, n)| glob_match(p, n));
    }
    p.len() == n.len() && p.iter().zip(&n).all(|(p, n)| glob_match(p, n))
}

/// The runner a command word names: a bare binary (`jest`), or a path to it
/// (`node_modules/.bin/jest`, `node_modules/jest/bin/jest.js`, mocha's `_mocha`).
fn runner_named(word: &str, binaries: &[(&str, Runner)]) -> Option<Runner> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let name = [".js", ".mjs", ".cjs"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext))
        .unwrap_or(name);
    let name = if name == "_mocha" { "mocha" } else { name };
    binaries
        .iter()
        .find(|(bin, _)| *bin == name)
        .map(|(_, runner)| *runner)
}

/// The flags of a `node` that runs the runner (`node --experimental-vm-modules
/// node_modules/.bin/jest`, as Jest's ES module support asks), added to `NODE_OPTIONS` so that
/// they reach the runner kiln starts.
fn node_options(before: &[&str], env: &mut Vec<(String, String)>) {
    let Some(at) = before.iter().rposition(|w| *w == "node") else {
        return;
    };
    let flags: Vec<&str> = before[at + 1..]
        .iter()
        .copied()
        .filter(|w| w.starts_with("--"))
        .collect();
    if flags.is_empty() {
        return;
    }
    let flags = flags.join(" ");
    // Values are shell words: the script's own (`"--a --b"` or bare) is read back first.
    match env.iter_mut().find(|(name, _)| name == "NODE_OPTIONS") {
        Some((_, value)) => {
            let own = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            *value = crate::shell::quote(&format!("{own} {flags}"));
        }
        None => env.push(("NODE_OPTIONS".into(), crate::shell::quote(&flags))),
    }
}

/// Flags of jest, mocha and vitest that pick tests by a pattern or a project.
const SELECTING: &[&str] = &[
    "--testPathPattern",
    "--testPathPatterns",
    "--testNamePattern",
    "-t",
    "--grep",
    "-g",
    "--fgrep",
    "--spec",
    "--selectProjects",
    "--project",
    "--dir",
];

/// Flags of jest, mocha and vitest that take the next word as their value (besides
/// [`SELECTING`]'s).
const VALUED: &[&str] = &[
    "--config",
    "-c",
    "--maxWorkers",
    "-w",
    "--testTimeout",
    "--timeout",
    "--rootDir",
    "--roots",
    "--env",
    "--testEnvironment",
    "--environment",
    "--require",
    "-r",
    "--file",
    "--ui",
    "-u",
    "--ignore",
    "--exclude",
    "--testPathIgnorePatterns",
    "--setupFiles",
    "--extension",
    "--pool",
    "--slow",
    "-s",
    "--retries",
    "--seed",
];

/// The arguments that are neither flags nor a flag's value: the files and directories a run
/// is given.
pub(crate) fn positionals(args: &[String]) -> Vec<&String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if arg.starts_with('-') {
            let name = arg.split('=').next().unwrap_or(arg);
            skip_value =
                (VALUED.contains(&name) || SELECTING.contains(&name)) && !arg.contains('=');
            continue;
        }
        out.push(arg);
    }
    out
}

/// `args` without its positionals (see [`positionals`]): the flags, with their values.
pub(crate) fn without_positionals(args: &[String]) -> Vec<String> {
    let files = positionals(args);
    args.iter()
        .filter(|a| !files.iter().any(|f| std::ptr::eq(*f, *a)))
        .cloned()
        .collect()
}

/// Whether a runner's (cleaned) arguments pick some of the tests: files or directories, or a
/// pattern flag. `--config jest.config.js` picks nothing.
fn selects_tests(args: &[String]) -> bool {
    args.iter()
        .any(|arg| SELECTING.contains(&arg.split('=').next().unwrap_or(arg)))
        || !positionals(args).is_empty()
}

/// `NAME=value` words before the runner, `cross-env` dropped.
fn env_prefix(words: &[&str]) -> Vec<(String, String)> {
    words
        .iter()
        .filter(|w| !w.starts_with('-'))
        .filter_map(|w| w.split_once('='))
        .map(|(name, value)| (name.to_string(), value.to_string()))
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
            "--reporter"
                | "-R"
                | "--outputFile"
                | "--config-env"
                | "--changedSince"
                | "--test-reporter"
                | "--test-reporter-destination"
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
                // `node --test`'s: `dot` names no test; without one it prints TAP or spec,
                // which the `node-test` parser reads.
                | "--test-reporter"
                | "--test-reporter-destination"
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
