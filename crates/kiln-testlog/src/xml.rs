//! A tolerant walk over the XML documents in a log, shared by the XML-based parsers.
//!
//! Logs hold XML reports concatenated (one per test binary or module), sometimes with text between
//! them. Each `<?xml` declaration starts a new document; a document that breaks off is reported and
//! the walk goes on with the next one, so one garbled report does not hide the others.

use quick_xml::Reader;
use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

/// What the parsers see of an XML document: elements and their attributes, no text.
pub(crate) enum XmlEvent<'a> {
    /// An opening tag; `empty` when it is self-closing (`<a/>`), in which case no `End` follows.
    Start {
        name: &'a str,
        attrs: &'a Attrs,
        empty: bool,
    },
    /// A closing tag.
    End { name: &'a str },
}

/// Attributes of one element, unescaped.
pub(crate) type Attrs = Vec<(String, String)>;

/// Value of attribute `key`, if present.
pub(crate) fn attr<'a>(attrs: &'a Attrs, key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn attributes(start: &BytesStart<'_>) -> Attrs {
    start
        .attributes()
        .filter_map(Result::ok)
        .map(|a| {
            let key = a.key.as_ref().to_owned();
            let value = a
                .normalized_value(XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| a.value.to_string());
            (key, value)
        })
        .collect()
}

/// Splits `text` into documents at each `<?xml` declaration (the whole text when there is none).
fn documents(text: &str) -> Vec<&str> {
    let starts: Vec<usize> = text.match_indices("<?xml").map(|(at, _)| at).collect();
    if starts.is_empty() {
        return vec![text];
    }
    let mut docs = Vec::with_capacity(starts.len());
    for (i, start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(text.len());
        docs.push(&text[*start..end]);
    }
    docs
}

/// Walks every document of `text`, starting each at the first `<` of one of `roots`, and calls `on`
/// for every element. Returns a problem message for each document that is not well formed.
pub(crate) fn walk(text: &str, roots: &[&str], on: &mut dyn FnMut(XmlEvent<'_>)) -> Vec<String> {
    let mut problems = Vec::new();
    for (index, doc) in documents(text).into_iter().enumerate() {
        let Some(root_at) = roots
            .iter()
            .filter_map(|root| doc.find(&format!("<{root}")))
            .min()
        else {
            continue;
        };
        let mut reader = Reader::from_str(&doc[root_at..]);
        reader.config_mut().check_end_names = false;
        let mut depth = 0usize;
        let mut seen_root = false;
        loop {
            match reader.read_event() {
                Ok(Event::Start(start)) => {
                    depth += 1;
                    seen_root = true;
                    let name = start.local_name().as_ref().to_owned();
                    let attrs = attributes(&start);
                    on(XmlEvent::Start {
                        name: &name,
                        attrs: &attrs,
                        empty: false,
                    });
                }
                Ok(Event::Empty(start)) => {
                    seen_root = true;
                    let name = start.local_name().as_ref().to_owned();
                    let attrs = attributes(&start);
                    on(XmlEvent::Start {
                        name: &name,
                        attrs: &attrs,
                        empty: true,
                    });
                }
                Ok(Event::End(end)) => {
                    depth = depth.saturating_sub(1);
                    let name = end.local_name().as_ref().to_owned();
                    on(XmlEvent::End { name: &name });
                }
                Ok(Event::Eof) => {
                    if depth > 0 {
                        problems.push(format!(
                            "xml document {} ends inside {depth} open elements (truncated?)",
                            index + 1
                        ));
                    }
                    break;
                }
                Ok(_) => {}
                Err(err) => {
                    // Text after a complete document is log noise, not a broken report.
                    if depth > 0 || !seen_root {
                        problems.push(format!(
                            "xml document {} is not well formed at byte {}: {err}",
                            index + 1,
                            reader.error_position()
                        ));
                    }
                    break;
                }
            }
        }
    }
    problems
}

/// Collects the XML reports found in a stream of lines, so that line-oriented parsers can read
/// reports printed among console output: a report starts at a line with `<?xml` or one of the
/// root tags, and ends at the line that closes the root. Only the lines of the open report are
/// held.
pub(crate) struct DocumentLines {
    roots: &'static [&'static str],
    open: Option<String>,
}

impl DocumentLines {
    /// Collects reports whose root element is one of `roots`.
    pub(crate) const fn new(roots: &'static [&'static str]) -> Self {
        Self { roots, open: None }
    }

    /// Reads one line; returns the text of a report when this line completes it.
    pub(crate) fn line(&mut self, line: &str) -> Option<String> {
        if self.open.is_none() {
            // Most lines hold no tag at all; only those are worth the root comparisons.
            if !line.contains('<') {
                return None;
            }
            let starts = line.contains("<?xml")
                || self.roots.iter().any(|root| {
                    line.contains(&format!("<{root}>")) || line.contains(&format!("<{root} "))
                });
            if !starts {
                return None;
            }
            self.open = Some(String::new());
        }
        let text = self.open.as_mut()?;
        text.push_str(line);
        text.push('\n');
        let closes = self
            .roots
            .iter()
            .any(|root| line.contains(&format!("</{root}>")));
        if closes { self.open.take() } else { None }
    }

    /// The report still open at the end of the log (cut off), if any.
    pub(crate) fn finish(&mut self) -> Option<String> {
        self.open.take()
    }
}
