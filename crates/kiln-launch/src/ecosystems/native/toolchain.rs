//! Which toolchain a C/C++ repository gets: the Debian stable of its base commit's era (GCC 10 on
//! bullseye before bookworm's release, GCC 12 on bookworm after), unless it declares a C++
//! standard that only the newer GCC implements; and the repair that starts a launch over on the
//! older toolchain when the build fails the way old code fails on a new one.

use std::path::Path;

use kiln_core::ImageBuild;

use crate::debian::Suite;
use crate::images;
use crate::plan::{RepairContext, cutoff_day, read};
use crate::repair::{Failed, Phase, Repair, Rule, Target};

/// Dockerfile of the C/C++ image (`ARG SUITE` picks Debian's GCC, CMake, Meson, autotools).
pub const DOCKERFILE: &str = include_str!("cpp.Dockerfile");

/// Bookworm's release day: code written before it was built with bullseye's GCC 10 or older.
const BOOKWORM_RELEASED: &str = "2023-06-10";

/// The C/C++ image of `suite` (`kiln/cpp:<suite>-<hash>`), with `ca_bundle` (PEM) if given.
#[must_use]
pub fn image(suite: Suite, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let dockerfile = images::with_arg(DOCKERFILE, "SUITE", suite.name());
    images::image(dockerfile, "cpp", suite.name(), ca_bundle)
}

/// The GCC of a suite's image, for the row's reason.
#[must_use]
pub fn compilers(suite: Suite) -> &'static str {
    match suite {
        Suite::Bullseye => "GCC 10, CMake 3.18 and Meson 0.56 (Debian bullseye)",
        Suite::Bookworm => "GCC 12, CMake 3.25 and Meson 1.0 (Debian bookworm)",
        Suite::Trixie => "GCC 14, CMake 3.31 and Meson 1.7 (Debian trixie)",
    }
}

/// The newest C++ standard the build files at the root ask for (`CMAKE_CXX_STANDARD 20`,
/// `cxx_std_20`, `-std=c++2a`, meson's `cpp_std=c++20`), as a year (98 counts as 1998).
#[must_use]
pub fn declared_standard(root: &Path) -> Option<u32> {
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"CMAKE_CXX_STANDARD\s+(\d\d)\b|cxx_std_(\d\d)\b|-std=(?:c|gnu)\+\+(\d\w)\b|cpp_std\s*=\s*'?(?:c|gnu)\+\+(\d\w)",
        )
        .expect("regex")
    });
    let year = |text: &str| -> Option<u32> {
        let n: u32 = match text {
            "0x" => 11,
            "1y" => 14,
            "1z" => 17,
            "2a" => 20,
            "2b" => 23,
            "2c" => 26,
            other => other.parse().ok()?,
        };
        Some(if n >= 90 { 1900 + n } else { 2000 + n })
    };
    ["CMakeLists.txt", "meson.build", "Makefile", "configure.ac"]
        .iter()
        .filter_map(|file| read(root, file))
        .flat_map(|text| {
            PATTERN
                .captures_iter(&text)
                .filter_map(|caps| {
                    let found = caps.iter().skip(1).flatten().next()?;
                    year(found.as_str())
                })
                .collect::<Vec<_>>()
        })
        .max()
}

/// Bullseye's CMake: a project that requires a newer one gets bookworm whatever its era.
const BULLSEYE_CMAKE: (u32, u32) = (3, 18);

/// The suite for a base commit of `cutoff`'s date whose build files declare `standard` and
/// `cmake_minimum_required(VERSION cmake_minimum)`, and why.
#[must_use]
pub fn suite_for(
    cutoff: Option<&str>,
    standard: Option<u32>,
    cmake_minimum: Option<&str>,
) -> (Suite, String) {
    let day = cutoff.map(cutoff_day);
    // `3.20`, `3.20.1`, `3.14...3.27` (the minimum is the first).
    let cmake = cmake_minimum.and_then(|v| {
        let mut parts = v.split("...").next()?.split('.');
        let major = parts.next()?.parse::<u32>().ok()?;
        let minor = parts.next()?.parse::<u32>().ok()?;
        Some((major, minor))
    });
    match (day, standard) {
        (_, Some(year)) if year >= 2020 => (
            Suite::Bookworm,
            format!(
                "the build files ask for C++{}, which GCC 10 implements only in part",
                year % 100
            ),
        ),
        (Some(_), _) if cmake.is_some_and(|c| c > BULLSEYE_CMAKE) => (
            Suite::Bookworm,
            format!(
                "cmake_minimum_required {} is newer than bullseye's CMake 3.18",
                cmake_minimum.unwrap_or_default()
            ),
        ),
        (Some(day), _) if day < BOOKWORM_RELEASED => (
            Suite::Bullseye,
            format!(
                "the base commit ({day}) predates Debian bookworm ({BOOKWORM_RELEASED}): the toolchain of its era"
            ),
        ),
        (Some(day), _) => (Suite::Bookworm, format!("the base commit is of {day}")),
        (None, _) => (
            Suite::Bookworm,
            "no commit date to choose an older toolchain by".to_string(),
        ),
    }
}

/// What GCC and Clang print after a warning `-Werror` (or `-Werror=<warning>`) made an error.
const WARNING_AS_ERROR: &str = r"\[-Werror=([A-Za-z0-9_+=-]+)\]";

/// A build that stops on warnings its `-Werror` (the build's own, or `-Werror=<warning>`, or
/// the `MOREFLAGS`, `WERROR=1` of a test target) turned into errors, on a compiler newer than
/// the code: each warning named in the output is demoted with `-Wno-error=<warning>` through
/// `CPPFLAGS`, which make's rules and most Makefiles pass to every C and C++ compile, which a
/// `CPPFLAGS +=` of the Makefile keeps, and which no `CFLAGS ?= -O3` default loses; the image
/// carries it, so validation's rebuilds compile alike. A per-warning `-Wno-error=` wins over
/// a global `-Werror` wherever it stands on the command line.
fn demote_warnings(f: &Failed<'_>, _: &regex::Captures<'_>, _: &RepairContext) -> Option<Repair> {
    let named = regex::Regex::new(WARNING_AS_ERROR).ok()?;
    let mut warnings: Vec<&str> = named
        .captures_iter(crate::repair::tail(f.output))
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    warnings.sort_unstable();
    warnings.dedup();
    (!warnings.is_empty()).then(|| {
        let flags: Vec<String> = warnings.iter().map(|w| format!("-Wno-error={w}")).collect();
        Repair::Env("CPPFLAGS".into(), flags.join(" "))
    })
}

/// The repair rules of C/C++ plans that concern the toolchain.
pub static RULES: &[Rule] = &[
    Rule {
        name: "cpp-toolchain-drift",
        phase: Phase::Setup,
        target: Target::Any,
        // glibc 2.34 made MINSIGSTKSZ a call to sysconf; GCC 11 and 12 stopped including headers
        // transitively (`did you forget to '#include <limits>'`) and warn more under -Werror.
        // GCC quotes with ' under LANG=C and with ‘ ’ under a UTF-8 locale (kiln's images).
        signature: r"call to non-['‘]?constexpr['’]? function[^\n]*sysconf|is defined in header ['‘]<[A-Za-z0-9_./]+>['’]; did you forget to ['‘]#include|error: [^\n]*\[-Werror=[A-Za-z0-9_+=-]+\]",
        description: "code of an older toolchain's era fails on the newer one (glibc's MINSIGSTKSZ is no longer a constant, headers GCC 11 stopped including, new warnings under -Werror): the launch starts over on Debian bullseye's GCC 10",
        repair: |_, _, cx: &RepairContext| match cx.suite {
            Some(Suite::Bookworm | Suite::Trixie) => Some(Repair::Interpreter(Suite::Bullseye)),
            _ => None,
        },
    },
    Rule {
        name: "cpp-warnings-as-errors",
        phase: Phase::Setup,
        target: Target::Any,
        signature: WARNING_AS_ERROR,
        description: "a build's -Werror turns the warnings of a newer compiler into errors (on the oldest toolchain kiln has): each warning named is demoted with -Wno-error=<warning> in CPPFLAGS, set in the image",
        repair: demote_warnings,
    },
    Rule {
        name: "cpp-test-build-warnings-as-errors",
        phase: Phase::Tests,
        target: Target::Any,
        signature: WARNING_AS_ERROR,
        description: "the test target's build adds -Werror itself (`test: MOREFLAGS += -Werror`) and a newer compiler's warnings stop it after setup succeeded: each warning named is demoted with -Wno-error=<warning> in CPPFLAGS, set in the image, and the tests run again",
        repair: demote_warnings,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::testutil::{step_repair_in, test_repair};
    use crate::steps::Step;

    #[test]
    fn the_era_and_the_declared_standard_choose_the_suite() {
        assert_eq!(
            suite_for(Some("2020-05-01T00:00:00Z"), None, None).0,
            Suite::Bullseye
        );
        assert_eq!(
            suite_for(Some("2020-05-01T00:00:00Z"), Some(2017), None).0,
            Suite::Bullseye
        );
        assert_eq!(
            suite_for(Some("2020-05-01T00:00:00Z"), Some(2020), None).0,
            Suite::Bookworm
        );
        assert_eq!(
            suite_for(Some("2024-01-01T00:00:00Z"), None, None).0,
            Suite::Bookworm
        );
        assert_eq!(suite_for(None, None, None).0, Suite::Bookworm);
        // A CMake newer than bullseye's: bookworm whatever the era; 3.18 and older fit.
        let old = Some("2020-05-01T00:00:00Z");
        assert_eq!(suite_for(old, None, Some("3.20")).0, Suite::Bookworm);
        assert_eq!(suite_for(old, None, Some("3.14...3.27")).0, Suite::Bullseye);
        assert_eq!(suite_for(old, None, Some("3.18.4")).0, Suite::Bullseye);
        assert_eq!(suite_for(old, None, Some("2.8")).0, Suite::Bullseye);
    }

    #[test]
    fn standards_are_read_from_the_build_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        assert_eq!(declared_standard(dir.path()), None);
        write(
            "CMakeLists.txt",
            "set(CMAKE_CXX_STANDARD 14)\ntarget_compile_features(x PUBLIC cxx_std_17)\n",
        );
        assert_eq!(declared_standard(dir.path()), Some(2017));
        write("Makefile", "CXXFLAGS += -std=c++2a -Wall\n");
        assert_eq!(declared_standard(dir.path()), Some(2020));
        write("Makefile", "CFLAGS = -std=c99\nCXXFLAGS = -std=gnu++98\n");
        assert_eq!(declared_standard(dir.path()), Some(2017));
        write(
            "meson.build",
            "project('x', 'cpp', default_options: ['cpp_std=c++20'])\n",
        );
        assert_eq!(declared_standard(dir.path()), Some(2020));
    }

    /// zstd's `make test` adds `-Werror` itself: GCC 10 and 12 name the warnings it made
    /// errors, and each is demoted in CPPFLAGS; a test run failing otherwise is not this rule's.
    #[test]
    fn warnings_a_test_build_made_errors_are_demoted_each_by_name() {
        let rules: Vec<&Rule> = RULES.iter().collect();
        let test = crate::steps::TestCommand::plain("make test");
        let output = "cc -O3 -g -Werror -c zstd_compress.c
zstd_compress.c:2338:5: error: dereferencing type-punned pointer will break strict-aliasing rules [-Werror=strict-aliasing]
util.c:40:9: error: 'strncpy' output truncated before terminating nul [-Werror=stringop-truncation]
zstd_compress_literals.c:66:5: error: dereferencing type-punned pointer [-Werror=strict-aliasing]
cc1: all warnings being treated as errors
make[1]: *** [Makefile:120: zstd_compress.o] Error 1
";
        assert_eq!(
            test_repair(&rules, &test, output),
            Some((
                "cpp-test-build-warnings-as-errors",
                Repair::Env(
                    "CPPFLAGS".into(),
                    "-Wno-error=strict-aliasing -Wno-error=stringop-truncation".into()
                )
            ))
        );
        assert_eq!(
            test_repair(
                &rules,
                &test,
                "test.c:3: error: 'x' undeclared
make: *** [test] Error 1
"
            ),
            None
        );
    }

    #[test]
    fn toolchain_drift_starts_over_on_bullseye_once() {
        let rules: Vec<&Rule> = RULES.iter().collect();
        let step = Step::shell("cmake --build build-kiln -j2");
        let on = |suite| RepairContext {
            suite: Some(suite),
            ..RepairContext::default()
        };
        for output in [
            // Catch2 2.x on glibc 2.34+.
            "catch.hpp:10822:58: error: call to non-'constexpr' function 'long int sysconf(int)'\n",
            "a.cpp:4:42: error: call to non-‘constexpr’ function ‘long int sysconf(int)’\n",
            "a.cpp:1:1: note: ‘std::numeric_limits’ is defined in header ‘<limits>’; did you forget to ‘#include <limits>’?\n",
            "src/a.cpp:3:10: error: 'numeric_limits' is not a member of 'std'\nsrc/a.cpp:1:1: note: 'std::numeric_limits' is defined in header '<limits>'; did you forget to '#include <limits>'?\n",
            "src/b.c:7:5: error: this 'if' clause does not guard... [-Werror=misleading-indentation]\n",
        ] {
            let (name, repair) =
                step_repair_in(&rules, &step, output, &on(Suite::Bookworm)).unwrap();
            assert_eq!(
                (name, repair),
                ("cpp-toolchain-drift", Repair::Interpreter(Suite::Bullseye))
            );
            // Already on bullseye: nothing older to go to; a warning made an error is demoted.
            let demoted = output.contains("-Werror=").then(|| {
                (
                    "cpp-warnings-as-errors",
                    Repair::Env(
                        "CPPFLAGS".into(),
                        "-Wno-error=misleading-indentation".into(),
                    ),
                )
            });
            assert_eq!(
                step_repair_in(&rules, &step, output, &on(Suite::Bullseye)),
                demoted
            );
        }
        assert_eq!(
            step_repair_in(
                &rules,
                &step,
                "error: expected ';' before '}' token\n",
                &on(Suite::Bookworm)
            ),
            None
        );
    }
}
