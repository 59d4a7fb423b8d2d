//! The vocabulary every table's compiler shares: TOML tables walked key by key ([`Keys`]), the
//! typed key readers of [`Compiler`] that report located errors, and what compiling reports
//! ([`ConfigError`], [`Requirement`]).
//!
//! This module imports nothing else of `config`: the tables' compilers and the dispatcher above
//! them read their keys through it, so no module of `config` is imported back by what it uses.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::{RangeFull, RangeInclusive};
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One config error, located in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The config file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Dotted key the error concerns (empty for syntax errors).
    pub key: String,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

/// All errors found in a config, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

/// Something a config needs from the machine it runs on, and where the config says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The source or stage that needs it (`None` for the `[docker]` and `[dataset]` tables).
    pub node: Option<String>,
    /// Dotted key that names it.
    pub key: String,
    /// 1-based line of the key's value.
    pub line: usize,
    /// 1-based column of the key's value.
    pub column: usize,
    /// What is needed.
    pub need: Need,
}

/// What a [`Requirement`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// An environment variable that must be set and non-empty (a token).
    EnvVar(String),
    /// A file that must exist and be readable.
    File(PathBuf),
}

/// A config value cut for messages: a typo is worth echoing, a 10 MB value is not (escaped, so
/// that every message stays on one line).
pub(super) fn cut(text: &str) -> String {
    kiln_schema::shown(text)
}

/// A whole message kept to `max` characters and one line (control characters escaped), the
/// backstop for a message that quotes a value without [`cut`].
fn cut_long(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push_str(&format!("... ({} bytes)", text.len()));
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) type Table<'a> = DeTable<'a>;
pub(super) type Value<'a> = Spanned<DeValue<'a>>;

/// The state of one compile: the file and its text, where relative paths are anchored, and the
/// errors and requirements found so far. Each table's compiler adds its own methods.
pub(super) struct Compiler<'t> {
    pub(super) file: PathBuf,
    pub(super) text: &'t str,
    /// The config file's directory (see [`config_dir`]).
    base: PathBuf,
    pub(super) errors: Vec<ConfigError>,
    /// What the config needs from the machine it runs on, checked apart from compiling.
    pub(super) requirements: Vec<Requirement>,
    /// The node being compiled, for the requirements it declares.
    pub(super) current_node: Option<String>,
}

/// Reads the keys of one table, remembering which were consumed so the rest are reported unknown.
pub(super) struct Keys<'a, 'b> {
    pub(super) table: &'b Table<'a>,
    prefix: String,
    /// Span of the table header, for "missing key" errors.
    pub(super) at: usize,
    seen: BTreeSet<String>,
}

impl<'a, 'b> Keys<'a, 'b> {
    pub(super) fn new(table: &'b Table<'a>, prefix: &str, at: usize) -> Self {
        Self {
            table,
            prefix: prefix.to_string(),
            at,
            seen: BTreeSet::new(),
        }
    }

    pub(super) fn get(&mut self, key: &str) -> Option<&'b Value<'a>> {
        self.seen.insert(key.to_string());
        self.table
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == key)
            .map(|(_, v)| v)
    }

    pub(super) fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    /// Reports keys that were never asked for.
    pub(super) fn finish(self, cx: &mut Compiler<'_>, allowed: &[&str]) {
        for (key, _) in self.table {
            let name = key.get_ref().as_ref();
            if !self.seen.contains(name) {
                let suggestion = closest(name, allowed)
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                cx.error_at(
                    key.span().start,
                    &self.path(name),
                    format!(
                        "unknown key{suggestion}; expected one of: {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }
}

/// A type a key's value is read as by [`Compiler::read`].
pub(super) trait FromValue: Sized {
    /// The value as this type, or the message that says what was expected instead.
    fn from_value(value: &DeValue<'_>) -> Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_integer()
            .and_then(|i| i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok())
            .ok_or_else(|| format!("expected an integer, found {}", value.type_str()))
    }
}

/// A number: a float, or an integer read as one.
impl FromValue for f64 {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        match value {
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("expected a number, found {}", value.type_str()))
    }
}

impl FromValue for bool {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_bool()
            .ok_or_else(|| format!("expected true or false, found {}", value.type_str()))
    }
}

impl FromValue for String {
    fn from_value(value: &DeValue<'_>) -> Result<Self, String> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("expected a string, found {}", value.type_str()))
    }
}

/// The values of its type a key admits: `..` (all of them) or `min..=max`.
pub(super) trait Bounds<T> {
    /// The message saying why `value` is not admitted, if it is not.
    fn check(&self, value: &T) -> Result<(), String>;
}

impl<T> Bounds<T> for RangeFull {
    fn check(&self, _: &T) -> Result<(), String> {
        Ok(())
    }
}

impl<T: PartialOrd + fmt::Display> Bounds<T> for RangeInclusive<T> {
    fn check(&self, value: &T) -> Result<(), String> {
        if self.contains(value) {
            Ok(())
        } else {
            Err(format!(
                "{value} is out of range {}..={}",
                self.start(),
                self.end()
            ))
        }
    }
}

impl<'t> Compiler<'t> {
    /// A compile of `text`, the contents of the config file `file`.
    pub(super) fn new(file: &Path, text: &'t str) -> Self {
        Self {
            file: file.to_path_buf(),
            text,
            base: config_dir(file),
            errors: Vec::new(),
            requirements: Vec::new(),
            current_node: None,
        }
    }

    /// The 1-based line and column of a byte offset in the text.
    fn locate(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before
            .rfind('\n')
            .map_or(offset, |nl| offset - nl - 1)
            .saturating_add(1);
        (line, column)
    }

    pub(super) fn error_at(&mut self, offset: usize, key: &str, message: String) {
        // Every value a message quotes is cut where it is quoted; this is the backstop that keeps
        // a message one readable line whatever a config holds (keys are text from the file too).
        const MAX_MESSAGE: usize = 600;
        let key = cut_long(key, 120);
        let message = if message.len() > MAX_MESSAGE || message.contains(['\n', '\r']) {
            cut_long(&message, MAX_MESSAGE)
        } else {
            message
        };
        let (line, column) = self.locate(offset);
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line,
            column,
            key: key.to_string(),
            message,
        });
    }

    /// Records that the config needs `need` from its environment, located at `offset`.
    pub(super) fn require(&mut self, offset: usize, key: &str, need: Need) {
        let (line, column) = self.locate(offset);
        self.requirements.push(Requirement {
            node: self.current_node.clone(),
            key: key.to_string(),
            line,
            column,
            need,
        });
    }

    pub(super) fn table<'a, 'b>(
        &mut self,
        value: &'b Value<'a>,
        key: &str,
    ) -> Option<&'b Table<'a>> {
        if let DeValue::Table(table) = value.get_ref() {
            Some(table)
        } else {
            self.error_at(
                value.span().start,
                key,
                format!("expected a table, found {}", value.get_ref().type_str()),
            );
            None
        }
    }

    /// The value of `key` as a `T` that `bounds` admits, `None` when the key is absent;
    /// `Err(())` when it is present but wrong (reported at the value).
    pub(super) fn read_optional<T: FromValue>(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        bounds: impl Bounds<T>,
    ) -> Result<Option<T>, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(None);
        };
        let read =
            T::from_value(value.get_ref()).and_then(|read| bounds.check(&read).map(|()| read));
        match read {
            Ok(read) => Ok(Some(read)),
            Err(message) => {
                let path = keys.path(key);
                self.error_at(value.span().start, &path, message);
                Err(())
            }
        }
    }

    /// The value of `key` as a `T` that `bounds` admits, `default` when the key is absent;
    /// `Err(())` when it is present but wrong (reported at the value).
    pub(super) fn read<T: FromValue>(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: T,
        bounds: impl Bounds<T>,
    ) -> Result<T, ()> {
        Ok(self.read_optional(keys, key, bounds)?.unwrap_or(default))
    }

    /// A string key: `None` when absent, `Some(None)` when present but not a string (reported).
    pub(super) fn string(&mut self, keys: &mut Keys<'_, '_>, key: &str) -> Option<Option<String>> {
        match self.read_optional(keys, key, ..) {
            Ok(None) => None,
            Ok(Some(s)) => Some(Some(s)),
            Err(()) => Some(None),
        }
    }

    /// A string key with a default; `Err(())` when present but wrong (already reported).
    pub(super) fn string_or(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: &str,
    ) -> Result<String, ()> {
        self.read(keys, key, default.to_string(), ..)
    }

    pub(super) fn required_string(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
    ) -> Result<String, ()> {
        match self.string(keys, key) {
            None => {
                let (at, path) = (keys.at, keys.path(key));
                self.error_at(at, &path, "missing required key".into());
                Err(())
            }
            Some(Some(s)) => Ok(s),
            Some(None) => Err(()),
        }
    }

    pub(super) fn strings(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
    ) -> Result<Vec<String>, ()> {
        let Some(value) = keys.get(key) else {
            return Ok(Vec::new());
        };
        let path = keys.path(key);
        let Some(array) = value.get_ref().as_array() else {
            self.error_at(
                value.span().start,
                &path,
                format!(
                    "expected an array of strings, found {}",
                    value.get_ref().type_str()
                ),
            );
            return Err(());
        };
        let mut out = Vec::new();
        let mut ok = true;
        for item in array.iter() {
            match String::from_value(item.get_ref()) {
                Ok(s) => out.push(s),
                Err(message) => {
                    self.error_at(item.span().start, &path, message);
                    ok = false;
                }
            }
        }
        if ok { Ok(out) } else { Err(()) }
    }

    pub(super) fn one_of(
        &mut self,
        keys: &mut Keys<'_, '_>,
        key: &str,
        default: &str,
        allowed: &[&str],
    ) -> Result<String, ()> {
        let value = keys.get(key);
        let s = self.string_or(keys, key, default)?;
        if allowed.contains(&s.as_str()) {
            Ok(s)
        } else {
            let at = value.map_or(keys.at, |v| v.span().start);
            let path = keys.path(key);
            self.error_at(
                at,
                &path,
                format!(
                    "unknown value \"{}\"; expected one of: {}",
                    cut(&s),
                    allowed.join(", ")
                ),
            );
            Err(())
        }
    }

    /// A path from the config, relative ones anchored at the config file's directory.
    pub(super) fn path_value(&self, raw: &str) -> PathBuf {
        let path = PathBuf::from(raw);
        if path.is_absolute() {
            path
        } else {
            self.base.join(path)
        }
    }

    /// Expands `{config_dir}` in templates, so a config can name mirrors next to itself.
    pub(super) fn expand_base(&self, template: &str) -> String {
        template.replace("{config_dir}", &self.base.to_string_lossy())
    }
}

/// The directory of the config file, absolute: relative paths and `{config_dir}` are anchored
/// there. A bare file name (`--config pipeline.toml`) has an empty parent, which is the current
/// directory.
fn config_dir(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf())
}

/// The allowed name closest to `name`, when close enough to be a likely typo.
pub(super) fn closest<'s>(name: &str, allowed: &[&'s str]) -> Option<&'s str> {
    let limit = |a: &str| 2.max(a.len() / 4);
    allowed
        .iter()
        // The distance is at least the difference in length: a name far longer than every
        // allowed one (a 10 MB key) is no typo, and is not compared character by character.
        .filter(|a| name.len().abs_diff(a.len()) <= limit(a))
        .map(|a| (edit_distance(name, a), *a))
        .filter(|(d, a)| *d <= limit(a))
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `key` of the one-table config `text` as a `T` that `bounds` admits, and gives the
    /// value and the errors reported.
    fn check<T: FromValue>(
        text: &str,
        key: &str,
        default: T,
        bounds: impl Bounds<T>,
    ) -> (Result<T, ()>, String) {
        let (root, errors) = DeTable::parse_recoverable(text);
        assert!(errors.is_empty(), "{errors:?}");
        let root = root.into_inner();
        let mut cx = Compiler::new(Path::new("/cfg/pipeline.toml"), text);
        let mut keys = Keys::new(&root, "t", 0);
        let value = cx.read(&mut keys, key, default, bounds);
        (value, ConfigErrors(cx.errors).to_string())
    }

    #[test]
    fn each_type_says_what_it_expected_located_at_the_value() {
        let text = "n = 7\nbig = 300\nword = \"x\"\nhalf = 0.5\nflag = true\n";
        assert_eq!(check(text, "n", 1, 1..=100), (Ok(7), String::new()));
        assert_eq!(check(text, "absent", 1, 1..=100), (Ok(1), String::new()));
        assert_eq!(
            check(text, "big", 1, 1..=100),
            (
                Err(()),
                "/cfg/pipeline.toml:2:7: t.big: 300 is out of range 1..=100".into()
            )
        );
        assert_eq!(
            check(text, "word", 1, 1..=100).1,
            "/cfg/pipeline.toml:3:8: t.word: expected an integer, found string"
        );
        assert_eq!(check(text, "n", 0.0, 0.0..=10.0), (Ok(7.0), String::new()));
        assert_eq!(
            check(text, "half", 0.0, 0.0..=0.25).1,
            "/cfg/pipeline.toml:4:8: t.half: 0.5 is out of range 0..=0.25"
        );
        assert_eq!(
            check(text, "word", 0.0, ..).1,
            "/cfg/pipeline.toml:3:8: t.word: expected a number, found string"
        );
        assert_eq!(check(text, "flag", false, ..), (Ok(true), String::new()));
        assert_eq!(
            check(text, "n", false, ..).1,
            "/cfg/pipeline.toml:1:5: t.n: expected true or false, found integer"
        );
        assert_eq!(
            check(text, "n", String::new(), ..).1,
            "/cfg/pipeline.toml:1:5: t.n: expected a string, found integer"
        );
    }
}
