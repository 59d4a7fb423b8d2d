//! Which Python a repository gets: `.python-version` first, then `requires-python` and the base
//! commit's era, among the Pythons of kiln's images (Debian bullseye 3.9, bookworm 3.11, trixie
//! 3.13); and the image itself.

use kiln_core::ImageBuild;

use crate::debian::Suite;
use crate::images;
use crate::plan::cutoff_day;

/// Dockerfile of the Python image (`ARG SUITE` picks Debian's Python, plus uv).
pub const DOCKERFILE: &str = include_str!("python.Dockerfile");

/// The Python image of `suite` (bullseye: Python 3.9, bookworm: 3.11, trixie: 3.13), tagged
/// `kiln/python:<version>-<hash>`, with `ca_bundle` (PEM) installed if given.
#[must_use]
pub fn image(suite: Suite, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let version = match suite {
        Suite::Bullseye => "3.9",
        Suite::Bookworm => "3.11",
        Suite::Trixie => "3.13",
    };
    let dockerfile = images::with_arg(DOCKERFILE, "SUITE", suite.name());
    images::image(dockerfile, "python", version, ca_bundle)
}

/// The default Python image (3.11, Debian bookworm), with `ca_bundle` (PEM) installed if given.
#[must_use]
pub fn default_image(ca_bundle: Option<&[u8]>) -> ImageBuild {
    image(Suite::Bookworm, ca_bundle)
}

/// Whether a `requires-python` specifier admits `major.minor`. Only the common forms are read
/// (`>=3.8`, `>=3.8,<4`, `~=3.9`, `==3.11.*`); anything else is taken as admitting it.
#[must_use]
pub fn admits(spec: &str, major: u32, minor: u32) -> bool {
    let version = |s: &str| -> Option<(u32, u32)> {
        let mut parts = s.trim().trim_end_matches(".*").split('.');
        let a = parts.next()?.parse().ok()?;
        let b = parts.next().map_or(Some(0), |p| p.parse().ok())?;
        Some((a, b))
    };
    let have = (major, minor);
    spec.split(',').all(|clause| {
        let clause = clause.trim();
        let (op, rest) = ["~=", ">=", "<=", "==", "!=", ">", "<"]
            .iter()
            .find_map(|op| clause.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("", clause));
        let Some(want) = version(rest) else {
            return true;
        };
        match op {
            ">=" | "~=" => have >= want,
            ">" => have > want,
            "<=" => have <= want,
            "<" => have < want,
            "==" => have == want,
            "!=" => have != want || rest.contains('.') && rest.matches('.').count() > 1,
            _ => true,
        }
    })
}

/// The Pythons of kiln's images: suite, minor version (3.x), and the day that Python was
/// released.
const PYTHONS: &[(Suite, u32, &str)] = &[
    (Suite::Bullseye, 9, "2020-10-05"),
    (Suite::Bookworm, 11, "2022-10-24"),
    (Suite::Trixie, 13, "2024-10-07"),
];

/// Describes one of [`PYTHONS`]: `Python 3.11 (Debian bookworm)`.
fn python_name(suite: Suite, minor: u32) -> String {
    format!("Python 3.{minor} (Debian {})", suite.name())
}

/// Picks the Python image from `.python-version` (first), `requires-python` and the commit's
/// date, with the reason.
///
/// 3.11 is the default: most of the ecosystem's history supports it, and older pins of test
/// tools often break on 3.13. A commit from before 3.11 was released gets 3.9 when the project
/// admits it: dependencies resolved as of that date often have no wheels for newer Pythons, and
/// their sdists no longer build there.
#[must_use]
pub fn choose_python(
    requires: Option<&str>,
    pinned: Option<&str>,
    cutoff: Option<&str>,
) -> (Suite, String) {
    if let Some(line) = pinned.and_then(|p| {
        p.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
    }) {
        let mut parts = line.split('.');
        if let (Some("3"), Some(want)) = (
            parts.next(),
            parts.next().and_then(|m| m.parse::<u32>().ok()),
        ) {
            // The nearest configured version, the newer one on a tie.
            let (suite, minor, _) = PYTHONS
                .iter()
                .min_by_key(|(_, minor, _)| (minor.abs_diff(want), u32::MAX - minor))
                .copied()
                .unwrap_or(PYTHONS[1]);
            return (
                suite,
                format!(
                    "{}: .python-version asks for {line}",
                    python_name(suite, minor)
                ),
            );
        }
    }
    let admitted: Vec<(Suite, u32, &str)> = PYTHONS
        .iter()
        .copied()
        .filter(|(_, minor, _)| requires.is_none_or(|spec| admits(spec, 3, *minor)))
        .collect();
    let declared = match requires {
        Some(spec) => format!("requires-python `{spec}`"),
        None => "the repository declares no Python version".to_string(),
    };
    let day = cutoff.map(cutoff_day);
    let released_by = |released: &str| day.is_none_or(|d| d >= released);
    let find = |minor: u32| admitted.iter().copied().find(|p| p.1 == minor);
    let chosen = match (find(11), find(9)) {
        (Some(p311), _) if released_by(p311.2) => Some((p311, declared.clone())),
        (_, Some(p39)) => Some((
            p39,
            format!(
                "{declared}; the commit ({}) predates Python 3.11",
                day.unwrap_or("?")
            ),
        )),
        (Some(p311), None) => Some((p311, declared.clone())),
        (None, None) => admitted.first().map(|p| (*p, declared.clone())),
    };
    match chosen {
        Some(((suite, minor, _), why)) => (suite, format!("{}: {why}", python_name(suite, minor))),
        None => (
            Suite::Bookworm,
            format!(
                "Python 3.11 (Debian bookworm), though none of 3.9, 3.11 and 3.13 meets {declared}"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::CA_BUNDLE_MARKER;

    #[test]
    fn python_version_follows_the_repository() {
        use Suite::{Bookworm, Bullseye, Trixie};
        let recent = Some("2024-06-01T00:00:00Z");
        assert_eq!(choose_python(Some(">=3.8"), None, recent).0, Bookworm);
        assert_eq!(choose_python(None, None, None).0, Bookworm);
        assert_eq!(choose_python(Some(">=3.12"), None, recent).0, Trixie);
        assert_eq!(choose_python(None, Some("3.13.1\n"), recent).0, Trixie);
        assert_eq!(
            choose_python(Some(">=3.12"), Some("3.10"), recent).0,
            Bookworm
        );
        assert_eq!(choose_python(None, Some("3.8"), recent).0, Bullseye);
        assert_eq!(choose_python(Some(">=3.6,<3.10"), None, recent).0, Bullseye);
        let (suite, reason) = choose_python(Some(">=3.6"), None, Some("2019-09-17T12:00:00Z"));
        assert_eq!(suite, Bullseye);
        assert_eq!(
            reason,
            "Python 3.9 (Debian bullseye): requires-python `>=3.6`; the commit (2019-09-17) predates Python 3.11"
        );
        // A project that needs 3.11 gets it whatever its date.
        assert_eq!(
            choose_python(Some(">=3.11"), None, Some("2022-01-01T00:00:00Z")).0,
            Bookworm
        );
        let (suite, reason) = choose_python(Some(">=3.14"), None, recent);
        assert_eq!(suite, Bookworm);
        assert!(reason.contains("none of"), "{reason}");
    }

    #[test]
    fn requires_python_is_compared() {
        assert!(admits(">=3.8", 3, 11));
        assert!(!admits(">=3.12", 3, 11));
        assert!(!admits(">=3.6,<3.10", 3, 11));
        assert!(admits("~=3.9", 3, 11));
        assert!(admits("weird", 3, 11));
    }

    #[test]
    fn the_bundle_is_installed_after_apt_and_before_uv() {
        let build = image(Suite::Bookworm, Some(b"PEM"));
        let file = &build.dockerfile;
        let apt = file.find("ca-certificates procps").unwrap_or(usize::MAX);
        let update = file.find("RUN update-ca-certificates").unwrap_or(0);
        let uv = file.find("pip install --no-cache-dir uv==").unwrap_or(0);
        assert!(apt < update && update < uv, "{file}");
        assert!(!file.contains(CA_BUNDLE_MARKER));
        assert!(file.contains("PIP_CERT=/etc/ssl/certs/ca-certificates.crt"));
        assert!(file.contains("UV_SYSTEM_CERTS=1"));
        assert_eq!(
            build.context,
            vec![("kiln-extra.crt".to_string(), b"PEM".to_vec())]
        );
    }

    #[test]
    fn tags_change_with_the_bundle_and_not_otherwise() {
        let py = |bundle| image(Suite::Bookworm, bundle);
        let plain = py(None);
        assert!(plain.tag.starts_with("kiln/python:3.11-"), "{}", plain.tag);
        assert_eq!(plain.tag.len(), "kiln/python:3.11-".len() + 8);
        assert_eq!(plain.tag, py(None).tag);
        assert_eq!(plain.dockerfile, DOCKERFILE);
        let a = py(Some(b"A"));
        assert_ne!(a.tag, plain.tag);
        assert_ne!(a.tag, py(Some(b"B")).tag);
        assert_eq!(a.tag, py(Some(b"A")).tag);
    }
}
