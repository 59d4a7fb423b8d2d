//! One test run as one shell script: apply the patches (`git apply`, then `git apply --3way`,
//! then `patch --fuzz`, with the tree restored between tries), run the rebuild commands, run the
//! test command between markers that carry its exit code and duration.
//!
//! One command instead of one per step, because each command sent to the engine costs about
//! 100 ms and a run has up to five steps. The markers carry a per-run nonce, so output of the
//! code under test (a patch that prints fake markers) cannot forge them.

/// The method that applied a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `git apply`: exact context.
    GitApply,
    /// `git apply --3way`: merged against the blobs the patch names.
    ThreeWay,
    /// `patch --fuzz=5`: context found at an offset or with fuzz.
    Fuzz,
}

impl Method {
    /// Name recorded in the run summary.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::GitApply => "git-apply",
            Self::ThreeWay => "git-apply-3way",
            Self::Fuzz => "patch-fuzz",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::GitApply, Self::ThreeWay, Self::Fuzz]
            .into_iter()
            .find(|m| m.as_str() == name)
    }
}

/// Where patches are put inside the container.
pub const PATCH_DIR: &str = "/tmp/kiln";

/// The shell function that applies one patch with the fallback chain.
///
/// `git apply` and `patch` (after its dry run) are all-or-nothing, so only a failed `--3way`,
/// which can leave conflict markers, needs the tree restored: to the state before the patch,
/// saved with `git stash create` (which leaves the working tree alone). Markers are printed
/// with a newline before them in one write: git's progress goes to stderr unterminated, and
/// the two streams interleave.
const APPLY_FUNCTION: &str = r#"kiln_apply() {
  local name=$1 file=$2 snap
  if git apply --verbose --binary "$file"; then printf '\nkiln-patch-applied-%s %s git-apply\n' "$KILN_NONCE" "$name"; return 0; fi
  snap=$(git add -A >/dev/null 2>&1; git stash create); git reset -q
  if git apply --verbose --binary --3way "$file"; then git reset -q; printf '\nkiln-patch-applied-%s %s git-apply-3way\n' "$KILN_NONCE" "$name"; return 0; fi
  git reset -q --hard HEAD && git clean -fdq
  if [ -n "$snap" ]; then git stash apply --index -q "$snap"; git reset -q; fi
  if patch --batch --forward --no-backup-if-mismatch --fuzz=5 -p1 --dry-run -i "$file" >/dev/null && patch --batch --forward --no-backup-if-mismatch --fuzz=5 -p1 -i "$file"; then
    printf '\nkiln-patch-applied-%s %s patch-fuzz\n' "$KILN_NONCE" "$name"; return 0
  fi
  printf '\nkiln-patch-failed-%s %s\n' "$KILN_NONCE" "$name"; return 1
}"#;

/// The script of one run.
#[derive(Debug, Clone)]
pub struct RunScript {
    nonce: String,
    patches: Vec<String>,
}

/// What the markers of a [`RunScript`] said.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptResult {
    /// A patch applied nowhere.
    PatchFailed(String),
    /// Rebuild command `index` exited with `code`.
    RebuildFailed {
        /// Index into the rebuild commands.
        index: usize,
        /// Its exit code.
        code: i64,
    },
    /// The test command ran.
    Tested {
        /// `name:method` per patch.
        patch_methods: Vec<String>,
        /// Exit code of the test command.
        exit_code: i64,
        /// Seconds of the test command alone.
        seconds: f64,
        /// Its output, between the markers.
        output: String,
    },
    /// The script stopped before the test command finished (killed by the timeout, or the
    /// shell died).
    Unfinished {
        /// Whether the test command had started.
        test_started: bool,
    },
}

impl RunScript {
    /// A script for these patches (name, text); empty patches are skipped.
    #[must_use]
    pub fn new(patches: &[(&str, &str)]) -> Self {
        use std::hash::{Hash, Hasher};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (nanos, std::process::id(), patches.len()).hash(&mut hasher);
        Self {
            nonce: format!("{:016x}", hasher.finish()),
            patches: patches
                .iter()
                .filter(|(_, text)| !text.trim().is_empty())
                .map(|(name, _)| (*name).to_string())
                .collect(),
        }
    }

    /// The files to copy in before running: `(path, contents)` per non-empty patch.
    #[must_use]
    pub fn files<'a>(patches: &[(&str, &'a str)]) -> Vec<(String, &'a [u8])> {
        patches
            .iter()
            .filter(|(_, text)| !text.trim().is_empty())
            .map(|(name, text)| (format!("{PATCH_DIR}/{name}.patch"), text.as_bytes()))
            .collect()
    }

    /// The script text.
    #[must_use]
    pub fn script(&self, rebuild: &[String], test_command: &str) -> String {
        let mut script = format!("KILN_NONCE={}\n{APPLY_FUNCTION}\n", self.nonce);
        for name in &self.patches {
            script.push_str(&format!(
                "kiln_apply {name} {PATCH_DIR}/{name}.patch || exit 1\n"
            ));
        }
        for (i, command) in rebuild.iter().enumerate() {
            script.push_str(&format!(
                "( {command} ) || {{ rc=$?; printf '\\nkiln-rebuild-failed-%s {i} %d\\n' \"$KILN_NONCE\" \"$rc\"; exit 1; }}\n"
            ));
        }
        script.push_str("printf '\\nkiln-test-start-%s\\n' \"$KILN_NONCE\"\n");
        script.push_str("kiln_start=$(date +%s%N)\n");
        script.push_str(&format!("( {test_command} )\n"));
        script.push_str("rc=$?\n");
        script.push_str(
            "printf '\\nkiln-test-end-%s %d %d\\n' \"$KILN_NONCE\" \"$rc\" \"$(( $(date +%s%N) - kiln_start ))\"\n",
        );
        script.push_str("exit $rc\n");
        script
    }

    /// Reads the markers out of the script's output.
    #[must_use]
    pub fn read(&self, output: &str) -> ScriptResult {
        let marker = |kind: &str| format!("kiln-{kind}-{}", self.nonce);
        let (applied, failed, rebuild) = (
            marker("patch-applied"),
            marker("patch-failed"),
            marker("rebuild-failed"),
        );
        let (start, end) = (marker("test-start"), marker("test-end"));
        let mut methods = Vec::new();
        let mut test_from: Option<usize> = None;
        let mut offset = 0;
        for line in output.split_inclusive('\n') {
            let here = offset;
            offset += line.len();
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else { continue };
            if test_from.is_none() {
                if first == applied {
                    if let (Some(name), Some(method)) = (words.next(), words.next())
                        && Method::parse(method).is_some()
                    {
                        methods.push(format!("{name}:{method}"));
                    }
                } else if first == failed {
                    return ScriptResult::PatchFailed(words.next().unwrap_or("patch").to_string());
                } else if first == rebuild {
                    let index = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    let code = words.next().and_then(|w| w.parse().ok()).unwrap_or(-1);
                    return ScriptResult::RebuildFailed { index, code };
                } else if first == start {
                    test_from = Some(offset);
                }
            } else if first == end {
                let exit_code = words.next().and_then(|w| w.parse().ok()).unwrap_or(-1);
                let nanos: f64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0);
                let from = test_from.unwrap_or(here).min(here);
                return ScriptResult::Tested {
                    patch_methods: methods,
                    exit_code,
                    seconds: nanos / 1e9,
                    output: output[from..here].to_string(),
                };
            }
        }
        ScriptResult::Unfinished {
            test_started: test_from.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_give_methods_exit_code_and_output() {
        let script = RunScript::new(&[("test", "x"), ("gold", "y"), ("empty", " ")]);
        let n = script.nonce.clone();
        let text = script.script(&["make".into()], "pytest");
        assert!(
            text.contains("kiln_apply gold /tmp/kiln/gold.patch"),
            "{text}"
        );
        assert!(!text.contains("empty"), "{text}");
        let output = format!(
            "Checking patch a.py...\nkiln-patch-applied-{n} test git-apply\nHunk #1 succeeded\n\
             kiln-patch-applied-{n} gold patch-fuzz\nbuilt\nkiln-test-start-{n}\nPASSED t::a\n\
             kiln-test-end-fake 0 1\nkiln-test-end-{n} 1 2500000000\n"
        );
        assert_eq!(
            script.read(&output),
            ScriptResult::Tested {
                patch_methods: vec!["test:git-apply".into(), "gold:patch-fuzz".into()],
                exit_code: 1,
                seconds: 2.5,
                output: "PASSED t::a\nkiln-test-end-fake 0 1\n".into(),
            }
        );
        let output = format!("kiln-patch-applied-{n} test git-apply\nkiln-patch-failed-{n} gold\n");
        assert_eq!(
            script.read(&output),
            ScriptResult::PatchFailed("gold".into())
        );
        let output = format!("kiln-rebuild-failed-{n} 0 2\n");
        assert_eq!(
            script.read(&output),
            ScriptResult::RebuildFailed { index: 0, code: 2 }
        );
        let output = format!("kiln-test-start-{n}\nrunning forever");
        assert_eq!(
            script.read(&output),
            ScriptResult::Unfinished { test_started: true }
        );
    }

    #[test]
    fn forged_markers_without_the_nonce_are_ignored() {
        let script = RunScript::new(&[("test", "x")]);
        let output = "kiln-test-start-0000000000000000\nkiln-test-end-0000000000000000 0 1\n";
        assert_eq!(
            script.read(output),
            ScriptResult::Unfinished {
                test_started: false
            }
        );
    }

    #[test]
    fn the_script_runs_in_bash() {
        // The generated text must at least parse as bash (the container runs it with bash -c).
        let script = RunScript::new(&[("test", "x")]).script(&["true".into()], "echo hi");
        let status = std::process::Command::new("bash")
            .args(["-n", "-c", &script])
            .status();
        assert!(status.is_ok_and(|s| s.success()), "{script}");
    }
}
