//! The failure class of a setup step from its outcome: a timeout, the OOM killer, a registry
//! or network that did not give what was asked (`dependency-resolution`), else a build failure.

use kiln_core::ExecOutcome;
use kiln_schema::FailureClass;

/// Classifies a failed setup command from its outcome and output.
#[must_use]
pub fn classify_setup(outcome: &ExecOutcome) -> FailureClass {
    if outcome.timed_out {
        return FailureClass::Timeout;
    }
    if outcome.oom_killed {
        return FailureClass::Oom;
    }
    const RESOLUTION: &[&str] = &[
        "No solution found when resolving",
        "not found in the package registry",
        "Could not find a version that satisfies",
        "No matching distribution found",
        "was not found in the package registry",
        "Failed to fetch",
        "Failed to download",
        "certificate verify failed",
        "self-signed certificate",
        // cargo
        "failed to download",
        "failed to get `",
        "failed to select a version for",
        "no matching package named",
        "failed to load source for dependency",
        // network, any tool
        "Could not resolve host",
        "Temporary failure in name resolution",
        "UnknownHostException",
        "dial tcp",
        "ETIMEDOUT",
        "ERR_SOCKET_TIMEOUT",
        "ECONNRESET",
        "operation timed out",
        "Connection timed out",
        // npm, yarn, pnpm
        "npm ERR! code E404",
        "npm error code E404",
        "ETARGET",
        "ENOVERSIONS",
        "No matching version found for",
        "ENOTFOUND",
        "EAI_AGAIN",
        "ERR_PNPM_FETCH",
        "ERR_PNPM_NO_MATCHING_VERSION",
        "Couldn't find any versions for",
        // go
        "no required module provides",
        "missing go.sum entry",
        "reading https://proxy.golang.org",
        "unrecognized import path",
        // maven, gradle
        "Could not resolve dependencies",
        "Could not transfer artifact",
        "could not be resolved",
        "Could not resolve all files for configuration",
        "Could not resolve all dependencies",
        "Could not GET '",
        // pkg-config, apt
        "Unable to locate package",
    ];
    // pkg-config reports a missing module as `Package foo was not found in the pkg-config search
    // path` (autotools, meson) or `Package 'foo', required by ..., not found`.
    let pkg_config_missing = outcome.output.lines().any(|line| {
        let line = line.trim_start();
        line.contains("Package ")
            && (line.contains("not found") || line.contains("was not found"))
            && (line.contains("pkg-config")
                || line.contains("required by")
                || line.starts_with("Package "))
    });
    if pkg_config_missing
        || RESOLUTION
            .iter()
            .any(|needle| outcome.output.contains(needle))
    {
        FailureClass::DependencyResolution
    } else {
        FailureClass::Build
    }
}

/// At most this many error lines are kept in a row.
const ERROR_LINES: usize = 20;
/// An error line is cut to this many characters.
const ERROR_LINE_CHARS: usize = 300;

/// The lines of a failed command's output that name the error that decided it, in order: a
/// compiler's `error:` (gcc, clang, rustc `error[E…]`, javac), `make: ***`, `npm ERR!`, a
/// CMake or configure error, a Python exception (the last line of a traceback), pip's or
/// Maven's `ERROR`. A parallel build prints its progress after the error, so the log's tail
/// often does not hold it; these lines stay in the row beside the tail. The first
/// occurrences are kept (the first error usually causes the rest), and the last few when there
/// are more than [`ERROR_LINES`].
#[must_use]
pub fn deciding_errors(log: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let lines: Vec<&str> = log.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        let keep = is_error_line(line)
            // A traceback's exception is the first line after it that is not indented.
            || (is_exception_line(line)
                && lines[..i]
                    .iter()
                    .rev()
                    .take(200)
                    .any(|l| l.starts_with("Traceback (most recent call last)")));
        if keep {
            let cut: String = line.chars().take(ERROR_LINE_CHARS).collect();
            if !found.contains(&cut) {
                found.push(cut);
            }
        }
    }
    if found.len() > ERROR_LINES {
        let last = found.split_off(found.len() - 5);
        found.truncate(ERROR_LINES - 5);
        found.push("...".into());
        found.extend(last);
    }
    found
}

/// Whether a trimmed output line is a tool's error line.
fn is_error_line(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "error:",
        "error[",
        "fatal error:",
        "npm ERR!",
        "npm error",
        "ERROR:",
        "[ERROR]",
        "CMake Error",
        "configure: error:",
        "FAILED:",
        "ninja: build stopped",
        "E: ",
        "FATAL:",
    ];
    if STARTS.iter().any(|s| line.starts_with(s)) {
        return true;
    }
    // `make: *** [target] Error 2`, `make[2]: *** ...`, `gmake: ***`.
    if let Some((tool, _)) = line.split_once(": ***") {
        let tool = tool.split('[').next().unwrap_or(tool);
        if tool.ends_with("make") {
            return true;
        }
    }
    // `file.c:12:3: error: ...`, `src/x.rs:1:1: error[E0425]`, `Foo.java:3: error: ...`.
    line.contains(": error:")
        || line.contains(": fatal error:")
        || line.contains(": error[E")
        || line.contains(": Error:")
}

/// Whether a trimmed line reads as a Python exception (`ModuleNotFoundError: No module named x`,
/// `subprocess.CalledProcessError: ...`).
fn is_exception_line(line: &str) -> bool {
    let Some((name, _)) = line.split_once(':') else {
        return false;
    };
    let last = name.rsplit('.').next().unwrap_or(name);
    !name.contains(' ')
        && !name.is_empty()
        && (last.ends_with("Error") || last.ends_with("Exception") || last == "KeyboardInterrupt")
        && last.chars().next().is_some_and(char::is_uppercase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_core::session::tail;
    use std::time::Duration;

    #[test]
    fn the_deciding_errors_are_found_behind_a_parallel_builds_progress() {
        let mut log = String::from("[ 10%] Building CXX object src/a.o\n");
        log.push_str(
            "/testbed/src/sig.cpp:42:18: error: call to non-constexpr function 'long int sysconf(int)'\n",
        );
        for i in 11..90 {
            log.push_str(&format!("[ {i}%] Building CXX object src/f{i}.o\n"));
        }
        log.push_str("make[2]: *** [src/CMakeFiles/x.dir/build.make:76: src/sig.o] Error 1\n");
        log.push_str("make[1]: *** [CMakeFiles/Makefile2:100: all] Error 2\n");
        log.push_str("make: *** [Makefile:136: all] Error 2\n");
        let errors = deciding_errors(&log);
        assert_eq!(
            errors,
            [
                "/testbed/src/sig.cpp:42:18: error: call to non-constexpr function 'long int sysconf(int)'",
                "make[2]: *** [src/CMakeFiles/x.dir/build.make:76: src/sig.o] Error 1",
                "make[1]: *** [CMakeFiles/Makefile2:100: all] Error 2",
                "make: *** [Makefile:136: all] Error 2",
            ]
        );
        assert!(
            !tail(&log, 3).contains("sysconf"),
            "the tail alone misses it"
        );

        let python = "Traceback (most recent call last):\n  File \"setup.py\", line 3, in <module>\n    import numpy\nModuleNotFoundError: No module named 'numpy'\n";
        assert_eq!(
            deciding_errors(python),
            ["ModuleNotFoundError: No module named 'numpy'"]
        );
        let rust = "   Compiling x v0.1.0\nerror[E0425]: cannot find value `y` in this scope\n --> src/lib.rs:1:1\nerror: could not compile `x` (lib) due to 1 previous error\n";
        assert_eq!(deciding_errors(rust).len(), 2);
        let npm = "npm ERR! code ERESOLVE\nnpm ERR! ERESOLVE unable to resolve dependency tree\n";
        assert_eq!(deciding_errors(npm).len(), 2);
        // Words that only look like errors are not kept.
        assert!(
            deciding_errors("test_error_handling PASSED\nno errors: 0\nKeyError handling ok\n")
                .is_empty()
        );
        let many: String = (0..50)
            .map(|i| format!("a.c:{i}:1: error: e{i}\n"))
            .collect();
        let kept = deciding_errors(&many);
        assert_eq!(kept.len(), ERROR_LINES + 1);
        assert_eq!(kept[0], "a.c:0:1: error: e0");
        assert_eq!(kept[ERROR_LINES - 5], "...");
        assert_eq!(kept[ERROR_LINES], "a.c:49:1: error: e49");
    }

    fn outcome(exit_code: i64, output: &str) -> ExecOutcome {
        ExecOutcome {
            exit_code,
            output: output.into(),
            truncated: false,
            timed_out: false,
            oom_killed: false,
            duration: Duration::from_secs(1),
        }
    }

    #[test]
    fn setup_failures_are_classified() {
        let missing = outcome(
            1,
            "  × No solution found when resolving dependencies:\n  ╰─▶ Because kiln-nonexistent was not found in the package registry",
        );
        assert_eq!(classify_setup(&missing), FailureClass::DependencyResolution);
        assert_eq!(
            classify_setup(&outcome(1, "error: command 'gcc' failed")),
            FailureClass::Build
        );
        for log in [
            "error: failed to download `serde v1.0.0`",
            "npm ERR! code E404\nnpm ERR! 404 Not Found - GET https://registry.npmjs.org/nope",
            "npm ERR! code ERR_SOCKET_TIMEOUT\nnpm ERR! network Socket timeout",
            "npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for left-pad@99",
            "npm error code ENOVERSIONS\nnpm error No versions available for left-pad",
            "go: github.com/pkg/errors@v0.9.1: Get \"https://proxy.golang.org/github.com/pkg/errors/@v/v0.9.1.mod\": dial tcp: lookup proxy.golang.org: no such host",
            "main.go:3:8: no required module provides package github.com/x/y; to add it:",
            "[ERROR] Failed to execute goal on project demo: Could not resolve dependencies for project demo:demo:jar:1.0",
            "[ERROR] Plugin org.apache.maven.plugins:maven-resources-plugin:2.6 or one of its dependencies could not be resolved: Failed to read artifact descriptor for org.apache.maven.plugins:maven-resources-plugin:jar:2.6: Could not transfer artifact org.apache.maven.plugins:maven-resources-plugin:pom:2.6 from/to central",
            "-- Checking for module 'libfoo'\n--   Package 'libfoo', required by 'virtual:world', not found",
            "checking for FOO... no\nconfigure: error: Package requirements (libfoo >= 1) were not met:\n\nPackage libfoo was not found in the pkg-config search path.",
            "curl: (6) Could not resolve host: example.com",
        ] {
            assert_eq!(
                classify_setup(&outcome(1, log)),
                FailureClass::DependencyResolution,
                "{log}"
            );
        }
        assert_eq!(
            classify_setup(&outcome(
                2,
                "src/main.rs:1:1: error[E0425]: cannot find value `x`"
            )),
            FailureClass::Build
        );
        let mut slow = outcome(137, "");
        slow.timed_out = true;
        assert_eq!(classify_setup(&slow), FailureClass::Timeout);
    }
}
