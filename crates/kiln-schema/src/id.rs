//! Instance ids and the names derived from them.
//!
//! An instance id comes from strangers (a task file, a pull request's repository name, a
//! release someone published) and ends up in file names, image tags and generated files. It is
//! checked once where it enters kiln ([`InstanceId::new`]): the type cannot hold a path
//! separator, whitespace (newlines included) or a control character, and is never `.` or `..`.
//! File names and image tags are derived from it by [`InstanceId::file_stem`] only, injectively:
//! ids that a case-insensitive file system or Docker's lowercase references would merge, or that
//! are too long for a tag, get a hash of the whole id in their name.

use std::fmt;

use sha2::{Digest, Sha256};

/// Longest instance id accepted, in bytes (SWE-bench Pro's ids, the longest in use, are about
/// 130).
pub const MAX_ID_BYTES: usize = 256;

/// Longest readable part of a derived name; with the hash suffix a stem stays under 100 bytes,
/// which leaves room in Docker's 128-byte tags for suffixes such as `.dockerfile-check`.
const MAX_READABLE: usize = 80;

/// An instance id that names can be derived from safely; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(String);

/// Why a string is not an instance id. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text breaks a rule of [`InstanceId`].
    #[error("accept the instance id \"{shown}\": it {reason}")]
    Invalid {
        /// The text, escaped and cut for messages ([`shown`]).
        shown: String,
        /// The rule it breaks, e.g. "contains a path separator".
        reason: &'static str,
    },
}

impl InstanceId {
    /// Checks `text` and makes it an id.
    ///
    /// # Errors
    /// [`IdError::Invalid`] naming the rule the text breaks.
    pub fn new(text: &str) -> Result<Self, IdError> {
        let reason = if text.is_empty() {
            Some("is empty")
        } else if text.len() > MAX_ID_BYTES {
            Some("is longer than 256 bytes")
        } else if text == "." || text == ".." {
            Some("is `.` or `..`")
        } else if text.contains(['/', '\\']) {
            Some("contains a path separator")
        } else if text.contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']) {
            Some("contains a line break")
        } else if text.chars().any(char::is_control) {
            Some("contains a control character")
        } else if text.chars().any(char::is_whitespace) {
            Some("contains whitespace")
        } else if text.chars().any(is_format_control) {
            Some("contains an invisible formatting character (bidirectional or zero-width)")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(IdError::Invalid {
                shown: shown(text),
                reason,
            }),
            None => Ok(Self(text.to_string())),
        }
    }

    /// The id of the `number`-th of something that has no id of its own
    /// (`invalid-line-7` for an unreadable line of a task file): `kind` followed by `-` and
    /// the number.
    ///
    /// `kind` is a literal of kiln's own: lowercase ASCII letters and `-` only, which with the
    /// digits of the number break none of the rules of [`InstanceId::new`] (a test checks
    /// this); anything else in it is replaced by `-`.
    #[must_use]
    pub fn placeholder(kind: &'static str, number: usize) -> Self {
        let kind: String = kind
            .chars()
            .map(|c| if c.is_ascii_lowercase() { c } else { '-' })
            .collect();
        Self(format!("{kind}-{number}"))
    }

    /// The id as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's name in file names and image tags: the id itself when it is already a plain
    /// lowercase name (`kiln-demo__calc-2`), otherwise a readable lowercase form followed by
    /// `--` and a hash of the whole id (`owner__repo-7--1a2b3c4d5e6f7a8b`). A plain name never
    /// holds `--`, so the two forms never meet, and distinct ids get distinct stems. Every stem
    /// is a valid file name, Docker tag and Docker repository component.
    #[must_use]
    pub fn file_stem(&self) -> String {
        safe_name(&self.0)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for InstanceId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for InstanceId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for InstanceId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for InstanceId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<&str> for InstanceId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<InstanceId> for String {
    fn from(id: InstanceId) -> Self {
        id.0
    }
}

/// Stored as the plain string; read back through [`InstanceId::new`], so a table whose id
/// breaks a rule fails to read instead of handing the id on unchecked.
impl serde::Serialize for InstanceId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for InstanceId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::new(&text).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&str> for InstanceId {
    type Error = IdError;

    fn try_from(text: &str) -> Result<Self, IdError> {
        Self::new(text)
    }
}

/// Whether `text` is a plain name: lowercase ASCII letters and digits in runs joined by one
/// `.`, `_`, `__` or `-` (Docker's grammar for a repository path component, which also makes a
/// valid tag and file name), at most 100 bytes.
fn is_plain(text: &str) -> bool {
    if text.is_empty() || text.len() > 100 {
        return false;
    }
    let bytes = text.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        if !matches!(&text[separator..i], "." | "_" | "__" | "-") {
            return false;
        }
    }
}

/// A name for `text` that is a valid file name, Docker tag and repository component, distinct
/// for distinct texts: `text` itself when it is plain (see [`is_plain`]), else its readable
/// lowercase form, `--`, and 16 hex digits of its SHA-256.
#[must_use]
pub fn safe_name(text: &str) -> String {
    if is_plain(text) {
        return text.to_string();
    }
    let mut readable = String::new();
    let mut separator = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if readable.len() >= MAX_READABLE {
                break;
            }
            if !readable.is_empty() && !separator.is_empty() {
                readable.push_str(if matches!(separator.as_str(), "." | "_" | "__" | "-") {
                    &separator
                } else {
                    "_"
                });
            }
            separator.clear();
            readable.push(c.to_ascii_lowercase());
        } else {
            separator.push(c);
        }
    }
    if readable.is_empty() {
        readable.push('x');
    }
    let digest = Sha256::digest(text.as_bytes());
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{readable}--{hash}")
}

/// Unicode's invisible formatting characters (category Cf) that make text display other than
/// it reads: bidirectional embeddings, overrides and isolates (U+202A..U+202E,
/// U+2066..U+2069), marks (U+200E, U+200F, U+061C), zero-width characters (U+200B..U+200D,
/// U+2060, U+FEFF) and the soft hyphen. An id holding one looks like another id in logs,
/// tables and terminals.
fn is_format_control(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// A value as shown in messages: control characters and quotes escaped, so that a message stays
/// on one line, and cut after 80 characters with the full length given, so that a 10 MB value is
/// not echoed whole.
#[must_use]
pub fn shown(text: &str) -> String {
    const MAX: usize = 80;
    let (head, cut) = match text.char_indices().nth(MAX) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    };
    let mut out: String = head.escape_debug().collect();
    if cut {
        out.push_str(&format!("... ({} bytes)", text.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn placeholders_are_ids_by_construction() {
        for (kind, number) in [("invalid-line", 7), ("invalid-entry", 0), ("x/y z", 12)] {
            let id = InstanceId::placeholder(kind, number);
            assert_eq!(InstanceId::new(id.as_str()), Ok(id.clone()), "{id}");
        }
        assert_eq!(InstanceId::placeholder("x/y z", 12).as_str(), "x-y-z-12");
    }

    #[test]
    fn ids_that_could_leave_a_directory_or_a_line_are_refused() {
        for (text, reason) in [
            ("", "is empty"),
            (".", "is `.` or `..`"),
            ("..", "is `.` or `..`"),
            ("../x", "contains a path separator"),
            ("/etc/passwd", "contains a path separator"),
            ("a\\b", "contains a path separator"),
            ("x\nRUN touch /pwned", "contains a path separator"),
            ("x\nRUN true", "contains a line break"),
            ("x\r", "contains a line break"),
            ("x\u{2028}y", "contains a line break"),
            ("x\0y", "contains a control character"),
            ("x\u{1b}[31m", "contains a control character"),
            ("a b", "contains whitespace"),
            (
                "owner__repo-1\u{202E}2-",
                "contains an invisible formatting character (bidirectional or zero-width)",
            ),
            (
                "owner__re\u{200B}po-1",
                "contains an invisible formatting character (bidirectional or zero-width)",
            ),
            (
                "\u{2067}owner__repo-1",
                "contains an invisible formatting character (bidirectional or zero-width)",
            ),
        ] {
            let error = InstanceId::new(text).err();
            assert!(
                matches!(&error, Some(IdError::Invalid { reason: r, .. }) if *r == reason),
                "{text:?}: {error:?}"
            );
        }
        assert!(InstanceId::new(&"a".repeat(257)).is_err());
        let message = InstanceId::new(&format!("{}\n", "y".repeat(10_000_000)))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.len() < 200, "{message}");
        for good in [
            "astropy__astropy-12907",
            "Owner__Repo-7",
            "kiln-demo__calc-2",
            "owner__repo.abc123.func_pm__x",
            ".hidden",
        ] {
            assert!(InstanceId::new(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn plain_ids_are_their_own_stem_and_others_get_a_hash() {
        let stem = |t: &str| {
            InstanceId::new(t)
                .map(|i| i.file_stem())
                .unwrap_or_default()
        };
        assert_eq!(stem("kiln-demo__calc-2"), "kiln-demo__calc-2");
        assert_eq!(stem("astropy__astropy-12907"), "astropy__astropy-12907");
        let mixed = stem("Owner__Repo-7");
        assert!(mixed.starts_with("owner__repo-7--"), "{mixed}");
        assert_eq!(mixed.len(), "owner__repo-7--".len() + 16);
        let dotted = stem(".x");
        assert!(dotted.starts_with("x--"), "{dotted}");
        let long = stem(&"a".repeat(200));
        assert!(long.len() < 100, "{long}");
    }

    #[test]
    fn stems_are_injective_and_valid_docker_names() {
        // Ids that differ only in case, separators or past the readable part, and a plain id
        // crafted to look like another id's stem.
        let crafted = format!("foo__bar-1--{}", &safe_name("Foo__bar-1")[12..]);
        let ids = [
            "Foo__bar-1",
            "foo__bar-1",
            "FOO__BAR-1",
            "foo__bar_1",
            "foo__bar--1",
            "foo..bar-1",
            "foo:bar-1",
            &format!("{}1", "a".repeat(120)),
            &format!("{}2", "a".repeat(120)),
            &crafted,
            "-x",
            "x-",
        ];
        let stems: BTreeSet<String> = ids.iter().map(|t| safe_name(t)).collect();
        assert_eq!(stems.len(), ids.len(), "{stems:#?}");
        for stem in &stems {
            assert!(is_plain(stem) || stem.contains("--"), "{stem}");
            assert!(stem.len() <= 100, "{stem}");
            let valid = stem
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                && stem.starts_with(|c: char| c.is_ascii_alphanumeric())
                && stem.ends_with(|c: char| c.is_ascii_alphanumeric());
            assert!(valid, "{stem}");
        }
    }

    #[test]
    fn shown_values_stay_on_one_line_and_short() {
        assert_eq!(shown("a\nb\"c"), "a\\nb\\\"c");
        let long = shown(&"x".repeat(1000));
        assert!(long.ends_with("... (1000 bytes)"), "{long}");
        assert!(long.len() < 100);
    }
}
