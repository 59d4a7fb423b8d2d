//! Text helpers every parser uses: lazily compiled regexes, ANSI stripping, counts.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::{Captures, Regex};

/// A regex compiled on first use.
///
/// Patterns are constants of this crate, so a compile failure is a programming error; instead of
/// panicking in library code, a pattern that does not compile never matches, and the real-log tests
/// (which exercise every pattern) fail loudly.
pub(crate) struct Re {
    pattern: &'static str,
    cell: OnceLock<Option<Regex>>,
}

impl Re {
    pub(crate) const fn new(pattern: &'static str) -> Self {
        Self {
            pattern,
            cell: OnceLock::new(),
        }
    }

    fn get(&self) -> Option<&Regex> {
        self.cell
            .get_or_init(|| Regex::new(self.pattern).ok())
            .as_ref()
    }

    pub(crate) fn captures<'h>(&self, haystack: &'h str) -> Option<Captures<'h>> {
        self.get()?.captures(haystack)
    }

    pub(crate) fn is_match(&self, haystack: &str) -> bool {
        self.get().is_some_and(|re| re.is_match(haystack))
    }

    pub(crate) fn replace_all<'h>(&self, haystack: &'h str, replacement: &str) -> Cow<'h, str> {
        match self.get() {
            Some(re) => re.replace_all(haystack, replacement),
            None => Cow::Borrowed(haystack),
        }
    }

    #[cfg(test)]
    pub(crate) fn compiles(&self) -> bool {
        self.get().is_some()
    }
}

/// Removes ANSI escape sequences (colours, cursor moves, OSC hyperlinks).
pub(crate) fn strip_ansi(text: &str) -> Cow<'_, str> {
    static ANSI: Re =
        Re::new(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])");
    if text.contains('\x1b') {
        ANSI.replace_all(text, "")
    } else {
        Cow::Borrowed(text)
    }
}

/// Parses a decimal count, saturating on absurd values instead of failing.
pub(crate) fn count(text: &str) -> u64 {
    text.trim().parse().unwrap_or(u64::MAX)
}
