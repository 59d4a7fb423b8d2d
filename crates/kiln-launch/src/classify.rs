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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
