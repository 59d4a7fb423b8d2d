//! What a repository's own CI configuration says about building and testing it: the shell
//! commands of GitHub Actions workflows (`run:`), Travis (`install:`, `script:`, ...), CircleCI
//! (`run:`, `command:`) and Azure Pipelines (`script:`, `bash:`), one logical line each
//! (continuations joined, block scalars split into their lines), and of the task runners CI
//! often calls (a Makefile's test targets, tox, nox: [`runners`]). Planners and repair rules
//! read candidates from them (the features `cargo test` is given, the Debian `-dev` packages
//! the jobs install, the Python packages they install by name, the CMake options most
//! configure lines set alike, the servers the jobs start: [`services`], the variables they set
//! that the project reads: [`environment`]); the rules stay
//! first, and whatever comes from here goes through the same verification as the rules' own
//! commands.
//!
//! YAML is read line by line, not parsed: the keys that hold commands, with inline values and
//! `|`/`>` block scalars. Expressions (`${{ matrix.x }}`) are left as they are; a command that
//! holds one is not a candidate for anything that needs a literal value.

mod environment;
mod lines;
mod runners;
mod services;
mod yaml;

pub use environment::environment;
pub use services::{Service, ServiceKind, services};

use lines::shell_lines;
use yaml::{strip_comment, unquote, yaml_files};

use std::path::Path;

/// One command line of a CI configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiCommand {
    /// The file it is in, relative to the root.
    pub file: String,
    /// The command, continuations joined.
    pub text: String,
}

/// Reads the commands of one task-runner file.
type Reader = fn(&str) -> Vec<String>;

/// The commands of every CI configuration at `root`, in file order.
#[must_use]
pub fn commands(root: &Path) -> Vec<CiCommand> {
    let mut out = Vec::new();
    for (file, text) in yaml_files(root) {
        for line in yaml_commands(&text) {
            out.push(CiCommand {
                file: file.clone(),
                text: line,
            });
        }
    }
    let readers: [(&str, Reader); 5] = [
        ("Makefile", runners::makefile_commands),
        ("GNUmakefile", runners::makefile_commands),
        ("makefile", runners::makefile_commands),
        ("tox.ini", runners::tox_commands),
        ("noxfile.py", runners::nox_commands),
    ];
    for (file, read) in readers {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        out.extend(read(&text).into_iter().map(|text| CiCommand {
            file: file.to_string(),
            text,
        }));
    }
    out
}

/// Keys whose values are shell commands, in the CI systems kiln reads.
const COMMAND_KEYS: &[&str] = &[
    "run",
    "command",
    "script",
    "bash",
    "install",
    "before_install",
    "before_script",
];

/// The command lines of one YAML file.
fn yaml_commands(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let body = trimmed.strip_prefix("- ").unwrap_or(trimmed).trim_start();
        let Some((key, value)) = body.split_once(':') else {
            continue;
        };
        if !COMMAND_KEYS.contains(&key.trim()) {
            continue;
        }
        let value = strip_comment(value.trim());
        if value.starts_with('|') || value.starts_with('>') {
            // A block scalar: the lines indented deeper than the key.
            let mut block = Vec::new();
            while i < lines.len() {
                let next = lines[i];
                let next_indent = next.len() - next.trim_start().len();
                if !next.trim().is_empty() && next_indent <= indent {
                    break;
                }
                block.push(next.trim());
                i += 1;
            }
            out.extend(shell_lines(&block));
        } else if value.is_empty() {
            // A list of commands (`script:` then `- cmd` lines).
            while i < lines.len() {
                let next = lines[i].trim_start();
                let next_indent = lines[i].len() - next.len();
                if !lines[i].trim().is_empty() && (next_indent < indent || !next.starts_with("- "))
                {
                    break;
                }
                if let Some(item) = next.strip_prefix("- ") {
                    out.extend(shell_lines(&[unquote(strip_comment(item.trim()))]));
                }
                i += 1;
            }
        } else if !value.starts_with('{') && !value.starts_with('[') {
            out.extend(shell_lines(&[unquote(value)]));
        }
    }
    out
}

/// The words of a command line, split at blanks (quotes taken off whole words only); a CI
/// expression (`${{ matrix.x }}`) is one word, `$expr`.
fn words(command: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = command;
    while let Some(start) = rest.find("${{") {
        out.extend(rest[..start].split_whitespace().map(unquote));
        out.push("$expr");
        rest = rest[start..]
            .find("}}")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    out.extend(rest.split_whitespace().map(unquote));
    out
}

/// The arguments of every invocation of `<tool> <subcommand>` in the CI's commands (`cargo
/// test`, `apt-get install`), one list per invocation, in order; `tool` is any of `tools`.
fn invocations<'a>(
    commands: &'a [CiCommand],
    tools: &[&str],
    subcommand: &str,
) -> Vec<Vec<&'a str>> {
    commands
        .iter()
        .flat_map(|command| command.text.split(['&', ';', '|']))
        .filter_map(|part| {
            let words = words(part);
            let at = words
                .windows(2)
                .position(|w| tools.contains(&w[0]) && w[1] == subcommand)?;
            Some(words[at + 2..].to_vec())
        })
        .collect()
}

/// How the CI's `cargo test` commands select features: `--all-features`, or the union of their
/// `--features`/`-F` lists; `None` when no `cargo test` of the CI names features (or one names
/// them through an expression).
#[must_use]
pub fn cargo_test_features(commands: &[CiCommand]) -> Option<CargoFeatures> {
    let mut features: Vec<String> = Vec::new();
    let mut all = false;
    for args in invocations(commands, &["cargo"], "test") {
        let mut rest = args.iter();
        while let Some(word) = rest.next() {
            if *word == "--" {
                break;
            }
            let list = match *word {
                "--all-features" => {
                    all = true;
                    continue;
                }
                "--features" | "-F" => rest.next().copied().unwrap_or_default(),
                other => match other.strip_prefix("--features=") {
                    Some(list) => list,
                    None => continue,
                },
            };
            if list.contains("${") || list.contains("$(") || list.starts_with('$') {
                return None;
            }
            for feature in list.split([',', ' ']).filter(|f| !f.is_empty()) {
                if !features.iter().any(|f| f == feature) {
                    features.push(feature.to_string());
                }
            }
        }
    }
    if all {
        Some(CargoFeatures::All)
    } else if features.is_empty() {
        None
    } else {
        Some(CargoFeatures::List(features))
    }
}

/// The cache variables the CI's CMake configure lines mostly set (`cmake -S . -B build
/// -DFOO_TESTS=ON`, `-D FOO_TESTS:BOOL=ON`), by name, with their value: a variable more than
/// half of the configure lines set, all to the same literal value. What only some jobs set (a
/// variant: exceptions off, a sanitizer, a standard), what the lines set to different values
/// (a matrix of switches) or through an expression or a shell variable, is left out.
#[must_use]
pub fn cmake_definitions(commands: &[CiCommand]) -> Vec<(String, String)> {
    // Per variable: how many lines set it, and the value when all agree.
    let mut seen: std::collections::BTreeMap<String, (usize, Option<String>)> =
        std::collections::BTreeMap::new();
    let mut lines = 0usize;
    for command in commands {
        for part in command.text.split(['&', ';', '|']) {
            let words = words(part);
            let Some(at) = words
                .iter()
                .position(|w| *w == "cmake" || w.ends_with("/cmake"))
            else {
                continue;
            };
            let args = &words[at + 1..];
            if args
                .first()
                .is_some_and(|w| matches!(*w, "--build" | "--install" | "-E" | "-P" | "--version"))
            {
                continue;
            }
            let mut defined = std::collections::BTreeSet::new();
            let mut rest = args.iter();
            while let Some(word) = rest.next() {
                let definition = match *word {
                    "-D" => rest.next().copied().unwrap_or_default(),
                    other => match other.strip_prefix("-D") {
                        Some(definition) => definition,
                        None => continue,
                    },
                };
                let Some((name, value)) = definition.split_once('=') else {
                    continue;
                };
                let name = name.split(':').next().unwrap_or(name);
                // `-DX=${{ matrix.x }}` reads as `-DX=` followed by the expression.
                let literal = !value.is_empty() && !value.contains('$') && !value.contains('`');
                let value = literal.then(|| value.to_string());
                if !defined.insert(name) {
                    continue;
                }
                seen.entry(name.to_string())
                    .and_modify(|(count, kept)| {
                        *count += 1;
                        if *kept != value {
                            *kept = None;
                        }
                    })
                    .or_insert((1, value));
            }
            if !defined.is_empty() {
                lines += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (count, _))| 2 * count > lines)
        .filter_map(|(name, (_, value))| Some((name, value?)))
        .collect()
}

/// Features a CI's `cargo test` turns on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CargoFeatures {
    /// `--all-features`.
    All,
    /// `--features a,b` (names as the CI spells them: bare or `package/feature`).
    List(Vec<String>),
}

/// The Debian `-dev` packages the CI's jobs install with apt (`apt-get install -y libfoo-dev`),
/// sorted, without duplicates.
#[must_use]
pub fn apt_dev_packages(commands: &[CiCommand]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for args in invocations(commands, &["apt-get", "apt"], "install") {
        for word in args {
            let name = word.split('=').next().unwrap_or(word);
            let plain = name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
            if plain && name.ends_with("-dev") && !out.iter().any(|p| p == name) {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    out
}

/// The Python distributions the CI's jobs install by name (`pip install dask numpy`,
/// `python -m pip install`, `uv pip install`): requirement files, paths, the project itself and
/// lint, docs and release tools left out; at most [`MAX_PIP_PACKAGES`], in order.
#[must_use]
pub fn pip_packages(commands: &[CiCommand]) -> Vec<String> {
    static TOOLS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        let tools = crate::steps::NON_TEST_TOOLS.join("|");
        regex::Regex::new(&format!(
            r"^(?:{tools}|pip|setuptools|wheel|uv|build|virtualenv|coverage|pytest-cov)$"
        ))
        .expect("regex")
    });
    let mut out: Vec<String> = Vec::new();
    for args in invocations(commands, &["pip", "pip3"], "install") {
        let mut rest = args.iter();
        while let Some(word) = rest.next() {
            if matches!(
                *word,
                "-r" | "-c"
                    | "-e"
                    | "--requirement"
                    | "--constraint"
                    | "--editable"
                    | "-i"
                    | "--index-url"
                    | "--extra-index-url"
                    | "-f"
                    | "--find-links"
            ) {
                rest.next();
                continue;
            }
            if word.starts_with('-') || word.contains(['/', '$', '{', '@', ';']) {
                continue;
            }
            let name_end = word
                .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
                .unwrap_or(word.len());
            let name = word[..name_end].to_ascii_lowercase().replace('_', "-");
            let plain = word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.[],<>=!~".contains(c));
            if name.is_empty() || name == "." || !plain || TOOLS.is_match(&name) {
                continue;
            }
            if !out.iter().any(|p| p == word) && out.len() < MAX_PIP_PACKAGES {
                out.push((*word).to_string());
            }
        }
    }
    out
}

/// At most this many of the CI's Python packages are installed: a CI that installs more tests
/// many configurations, not one.
pub const MAX_PIP_PACKAGES: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    const WORKFLOW: &str = r#"name: CI
on: [push]
env:
  RUSTFLAGS: -Dwarnings
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: deps
        run: sudo apt-get update && sudo apt-get install -y libssl-dev pkg-config libxml2-dev=2.9 # tools
      - name: test
        run: |
          cargo test --workspace \
            --features full,test-util
          cargo test -p tokio-macros -F "rt"
      - run: cargo test --all-features --doc
      - name: matrix
        run: cargo build --features ${{ matrix.features }}
"#;

    #[test]
    fn workflow_commands_are_read_line_by_line() {
        let lines = yaml_commands(WORKFLOW);
        assert_eq!(
            lines,
            [
                "sudo apt-get update && sudo apt-get install -y libssl-dev pkg-config libxml2-dev=2.9",
                "cargo test --workspace --features full,test-util",
                "cargo test -p tokio-macros -F \"rt\"",
                "cargo test --all-features --doc",
                "cargo build --features ${{ matrix.features }}",
            ]
        );
    }

    #[test]
    fn travis_lists_and_inline_commands_are_read() {
        let travis = "language: cpp\ninstall:\n  - sudo apt-get install -qq libboost-dev\nscript:\n  - mkdir build && cd build\n  - cmake .. -DCATCH_DEVELOPMENT_BUILD=ON\n  - make && ctest\nafter_success: echo done\n";
        assert_eq!(
            yaml_commands(travis),
            [
                "sudo apt-get install -qq libboost-dev",
                "mkdir build && cd build",
                "cmake .. -DCATCH_DEVELOPMENT_BUILD=ON",
                "make && ctest",
            ]
        );
    }

    fn ci(lines: &[&str]) -> Vec<CiCommand> {
        lines
            .iter()
            .map(|l| CiCommand {
                file: "ci.yml".into(),
                text: (*l).to_string(),
            })
            .collect()
    }

    #[test]
    fn cargo_features_and_apt_packages_are_found() {
        let commands: Vec<CiCommand> = yaml_commands(WORKFLOW)
            .into_iter()
            .map(|text| CiCommand {
                file: "w.yml".into(),
                text,
            })
            .collect();
        assert_eq!(cargo_test_features(&commands), Some(CargoFeatures::All));
        assert_eq!(
            cargo_test_features(&commands[..3]),
            Some(CargoFeatures::List(vec![
                "full".into(),
                "test-util".into(),
                "rt".into()
            ]))
        );
        assert_eq!(cargo_test_features(&ci(&["cargo test --workspace"])), None);
        assert_eq!(
            cargo_test_features(&ci(&["cargo test --features $FEATURES"])),
            None
        );
        assert_eq!(apt_dev_packages(&commands), ["libssl-dev", "libxml2-dev"]);
    }

    #[test]
    fn cmake_definitions_are_those_every_configure_line_agrees_on() {
        let found = cmake_definitions(&ci(&[
            "cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DCATCH_DEVELOPMENT_BUILD=ON -D CATCH_BUILD_EXAMPLES:BOOL=OFF",
            "mkdir build && cd build && cmake .. -DCATCH_DEVELOPMENT_BUILD=ON -DCMAKE_BUILD_TYPE=Release -DCATCH_ENABLE_WERROR=${{ matrix.werror }} -DCATCH_BUILD_EXAMPLES=OFF",
            "cmake --build build -j2 -DNOT_A_DEFINITION=1",
            "/usr/bin/cmake -B b -DCATCH_USE_VALGRIND=$VALGRIND -DCATCH_DEVELOPMENT_BUILD=ON -DCATCH_BUILD_EXAMPLES=OFF",
            "cmake -B c -DCATCH_DEVELOPMENT_BUILD=ON -DCATCH_CONFIG_NO_EXCEPTIONS=ON",
        ]));
        // Four configure lines: the examples switch is in three, alike; the build type differs;
        // the exceptions switch is one job's variant.
        assert_eq!(
            found,
            [
                ("CATCH_BUILD_EXAMPLES".to_string(), "OFF".to_string()),
                ("CATCH_DEVELOPMENT_BUILD".into(), "ON".into()),
            ]
        );
    }

    #[test]
    fn pip_packages_leave_out_files_paths_and_tools() {
        let found = pip_packages(&ci(&[
            "python -m pip install --upgrade pip setuptools wheel",
            "pip install -r requirements-dev.txt -e . dask[array]>=2021.1 \"numpy<2\" flake8 pytest-xdist",
            "uv pip install --system hypothesis ./vendor/x ${{ matrix.extra }}",
            "pip install tox && tox -e py39",
        ]));
        assert_eq!(
            found,
            [
                "dask[array]>=2021.1",
                "numpy<2",
                "pytest-xdist",
                "hypothesis"
            ]
        );
    }

    #[test]
    fn a_comment_after_a_pip_install_names_no_packages() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
        std::fs::write(
            dir.path().join(".github/workflows/ci.yml"),
            "jobs:\n  test:\n    steps:\n      - run: |\n          python -m pip install -U pip # to ensure version > 20 to have cache dir\n          pip install pytest numpy  # the suite's\n",
        )
        .unwrap();
        assert_eq!(pip_packages(&commands(dir.path())), ["pytest", "numpy"]);
    }

    #[test]
    fn the_files_of_every_ci_system_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".github/workflows")).unwrap();
        std::fs::write(dir.path().join(".github/workflows/ci.yml"), WORKFLOW).unwrap();
        std::fs::write(
            dir.path().join(".travis.yml"),
            "script:\n  - cargo test --features serde\n",
        )
        .unwrap();
        let found = commands(dir.path());
        assert_eq!(found.len(), 6);
        assert_eq!(found[0].file, ".github/workflows/ci.yml");
        assert_eq!(found[5].file, ".travis.yml");
        assert_eq!(found[5].text, "cargo test --features serde");
    }

    #[test]
    fn task_runners_feed_the_same_candidates() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Makefile"),
            "test:\n\tcargo test --workspace --features full\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("noxfile.py"),
            "def tests(session):\n    session.install(\"pytest\", \"mock\")\n    session.run(\"pytest\")\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("tox.ini"),
            "[testenv]\ncommands = pip install hypothesis\n    pytest {posargs}\n",
        )
        .unwrap();
        let found = commands(dir.path());
        let files: Vec<&str> = found.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(
            files,
            ["Makefile", "tox.ini", "tox.ini", "noxfile.py", "noxfile.py"]
        );
        assert_eq!(
            cargo_test_features(&found),
            Some(CargoFeatures::List(vec!["full".into()]))
        );
        assert_eq!(pip_packages(&found), ["hypothesis", "pytest", "mock"]);
    }
}
