//! kiln-github: where candidates come from.
//!
//! Two sources produce [`kiln_schema::Candidate`] rows: the GitHub crawl (to come) and the ingest of
//! existing task files ([`read_task_file`]), which lets users re-validate published benchmarks.
//! [`clone_url`] turns a repository name into the URL (or local mirror path) it is cloned from.

pub mod crawl;
mod ingest;

pub use ingest::{IngestError, read_task_file, read_task_objects};

/// The clone URL template used when the configuration names none.
pub const DEFAULT_CLONE_URL_TEMPLATE: &str = "https://github.com/{repo}.git";

/// Expands a clone URL template for one repository.
///
/// `repo` is `owner/name`. The template may use `{repo}` (`owner/name`), `{owner}` and `{name}`,
/// so both the default [`DEFAULT_CLONE_URL_TEMPLATE`] and a local mirror layout such as
/// `/srv/mirrors/{owner}/{name}` work. A `repo` without a slash has an empty owner and is its own
/// name. Unknown placeholders are left as they are, so a typo shows up in the clone error.
#[must_use]
pub fn clone_url(template: &str, repo: &str) -> String {
    let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
    // Expand in one pass so that a value containing `{name}` is never expanded twice.
    let mut out = String::with_capacity(template.len() + repo.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let replaced = [("{repo}", repo), ("{owner}", owner), ("{name}", name)]
            .into_iter()
            .find(|(key, _)| tail.starts_with(key));
        match replaced {
            Some((key, value)) => {
                out.push_str(value);
                rest = &tail[key.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_template_points_at_github() {
        assert_eq!(
            clone_url(DEFAULT_CLONE_URL_TEMPLATE, "pallets/flask"),
            "https://github.com/pallets/flask.git"
        );
    }

    #[test]
    fn mirror_template_uses_owner_and_name() {
        assert_eq!(
            clone_url("/srv/mirrors/{owner}/{name}", "kiln-demo/calc"),
            "/srv/mirrors/kiln-demo/calc"
        );
        assert_eq!(
            clone_url("file:///m/{owner}__{name}.git?r={repo}", "a/b"),
            "file:///m/a__b.git?r=a/b"
        );
    }

    #[test]
    fn unknown_placeholders_and_braces_stay() {
        assert_eq!(clone_url("x/{nme}/{", "a/b"), "x/{nme}/{");
        assert_eq!(clone_url("{{name}}", "a/b"), "{b}");
        // A value that looks like a placeholder is not expanded again.
        assert_eq!(clone_url("{owner}/{name}", "{name}/x"), "{name}/x");
    }

    #[test]
    fn repo_without_owner() {
        assert_eq!(clone_url("/m/{owner}/{name}", "solo"), "/m//solo");
    }
}
