//! Names and values as the engine spells them: short ids, `repo:tag` references, kiln's labels,
//! `ENV` values and image ids.

use std::collections::{BTreeMap, HashMap};

use kiln_core::runtime::LABEL_MANAGED;

/// First 12 characters of an id, as `docker ps` shows it.
pub(super) fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Splits `repo[:tag]` at the tag's colon (a registry port's colon comes before a slash).
pub(super) fn split_tag(reference: &str) -> (&str, &str) {
    match reference.rfind(':') {
        Some(i) if !reference[i..].contains('/') => (&reference[..i], &reference[i + 1..]),
        _ => (reference, "latest"),
    }
}

/// Labels with [`LABEL_MANAGED`] added.
pub(super) fn managed(labels: &BTreeMap<String, String>) -> HashMap<String, String> {
    let mut all: HashMap<String, String> = labels.clone().into_iter().collect();
    all.insert(LABEL_MANAGED.to_string(), "1".to_string());
    all
}

/// A value for a Dockerfile `ENV` line: double-quoted, with `\` and `"` escaped.
pub(super) fn dockerfile_quote(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// An image id as Docker spells it, `sha256:<hex>`: Podman's compatible API answers a commit,
/// and its image lists, with the bare hex, and a digest recorded one way must compare equal to
/// the same image inspected the other way.
pub(super) fn content_id(id: String) -> String {
    if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("sha256:{id}")
    } else {
        id
    }
}

#[cfg(test)]
mod tests {
    use super::{content_id, split_tag};

    #[test]
    fn podman_bare_image_ids_get_dockers_prefix() {
        let hex = "fb84338616f78cbb27ec6239e8075b7bdab37307278bd660b0ea1fca193dcedd";
        assert_eq!(content_id(hex.into()), format!("sha256:{hex}"));
        assert_eq!(content_id(format!("sha256:{hex}")), format!("sha256:{hex}"));
        assert_eq!(content_id("abc".into()), "abc");
    }

    #[test]
    fn tags_split_at_the_last_colon_after_the_last_slash() {
        assert_eq!(split_tag("kiln/python:3.11-ab"), ("kiln/python", "3.11-ab"));
        assert_eq!(
            split_tag("localhost:5000/x"),
            ("localhost:5000/x", "latest")
        );
        assert_eq!(split_tag("localhost:5000/x:1"), ("localhost:5000/x", "1"));
        assert_eq!(split_tag("plain"), ("plain", "latest"));
    }
}
