//! Test-id normalisation shared by every parser.

use crate::text::{Re, strip_ansi};

/// Temporary directories whose names change between runs. Each is replaced by `<tmp>` so that the
/// same test gets the same id in every run (pytest's `tmp_path` leaks into parametrized ids).
static TEMP_PATH: Re = Re::new(
    r"(?x)
    (?:/private)?(?:/var/folders/[^/\s]+/[^/\s]+/T|/tmp)
    (?:
        /pytest-of-[^/\s\]]+/pytest-\d+(?:/[^/\s\]]+)?   # pytest tmp_path / tmpdir
      | /\.?tmp[A-Za-z0-9_]{6,}                        # Python tempfile, Rust tempfile (.tmpXXXXXX)
      | /go-build\d+                                    # go test build directories
    )",
);

/// Timing suffixes runners append after a test name: ` (0.01s)`, ` (12 ms)`, ` [0.003s]`, ` in 12ms`.
static TIMING_SUFFIX: Re = Re::new(
    r"(?:\s+\(\d+(?:\.\d+)?\s*(?:ns|us|µs|ms|s|sec|secs|seconds?|m|min)\)|\s+\[\d+(?:\.\d+)?\s*(?:ms|s)\]|\s+in\s+\d+(?:\.\d+)?\s*(?:ns|us|µs|ms|s|sec|seconds?))$",
);

/// Normalises a raw test id as printed by a runner into the stable key stored in datasets.
///
/// Removes ANSI escape codes, surrounding whitespace, one trailing timing suffix such as ` (0.01s)`
/// or ` in 12ms`, and replaces run-specific temporary directories (`/tmp/pytest-of-root/pytest-3/x0`,
/// `/tmp/tmpab12cd34`) with `<tmp>`. Inner spaces and brackets are kept: they are part of
/// parametrized ids. Normalising an already normalised id changes nothing.
#[must_use]
pub fn normalize_test_id(raw: &str) -> String {
    let text = strip_ansi(raw);
    let text = text.trim();
    let text = TIMING_SUFFIX.replace_all(text, "");
    let text = TEMP_PATH.replace_all(text.trim_end(), "<tmp>");
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_compile() {
        assert!(TEMP_PATH.compiles());
        assert!(TIMING_SUFFIX.compiles());
    }

    #[test]
    fn normalises() {
        let cases = [
            ("\x1b[32mtests/a.py::t\x1b[0m  ", "tests/a.py::t"),
            ("TestFoo/bar (0.01s)", "TestFoo/bar"),
            ("renders a list (12 ms)", "renders a list"),
            ("suite works in 12ms", "suite works"),
            ("t.py::test_p[a b-1]", "t.py::test_p[a b-1]"),
            (
                "t.py::test_f[/tmp/pytest-of-root/pytest-3/test_f0/x.txt]",
                "t.py::test_f[<tmp>/x.txt]",
            ),
            ("t.py::test_g[/tmp/tmpab12cd34/y]", "t.py::test_g[<tmp>/y]"),
            ("t.py::test_h[/tmp/data]", "t.py::test_h[/tmp/data]"),
        ];
        for (raw, want) in cases {
            let got = normalize_test_id(raw);
            assert_eq!(got, want, "raw {raw:?}");
            assert_eq!(normalize_test_id(&got), got, "idempotent on {got:?}");
        }
    }
}
