//! Whether the images a release names exist, and are the images its rows recorded: export
//! checks before it writes a release, `kiln check-images` checks a published one.

use std::collections::BTreeMap;

use kiln_core::{ContainerRuntime, RuntimeError};
use kiln_schema::ReleaseInstance;
use serde::Serialize;

/// What one row's image turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageVerdict {
    /// The engine has the image, with the recorded digest (or the row records none).
    Present,
    /// The engine did not have it; it was pulled from its registry, with the recorded digest.
    Pulled,
    /// Neither the engine nor (with pulling) its registry has it.
    Missing,
    /// The name points at another image than the one the row recorded.
    DigestChanged,
    /// The row names no image.
    Unnamed,
}

impl ImageVerdict {
    /// Whether the row's image is the one it recorded.
    #[must_use]
    pub fn is_good(self) -> bool {
        matches!(self, Self::Present | Self::Pulled)
    }
}

/// The check of one row's image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageCheck {
    /// The row.
    pub instance_id: String,
    /// The image it names.
    pub image: String,
    /// The digest it recorded.
    pub recorded: Option<String>,
    /// The digest the name has on the engine now.
    pub found: Option<String>,
    /// The outcome.
    pub verdict: ImageVerdict,
}

impl ImageCheck {
    /// The problem in words, for an error message (`None` when the image is good).
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        let what = match self.verdict {
            ImageVerdict::Present | ImageVerdict::Pulled => return None,
            ImageVerdict::Missing => "no such image".to_string(),
            ImageVerdict::Unnamed => "the row names no image".to_string(),
            ImageVerdict::DigestChanged => format!(
                "the name now points at {}, not the recorded {}",
                self.found.as_deref().unwrap_or("?"),
                self.recorded.as_deref().unwrap_or("?")
            ),
        };
        Some(format!("{}: {}: {what}", self.instance_id, self.image))
    }
}

/// Checks the image of every row: it exists on the engine (or, with `pull`, can be pulled from
/// its registry) and has the digest the row recorded. Each image is asked once.
///
/// # Errors
/// When the engine fails.
pub async fn check_images(
    runtime: &dyn ContainerRuntime,
    rows: &[ReleaseInstance],
    pull: bool,
) -> Result<Vec<ImageCheck>, RuntimeError> {
    let mut found: BTreeMap<String, (Option<String>, bool)> = BTreeMap::new();
    let mut checks = Vec::with_capacity(rows.len());
    for row in rows {
        if row.image.is_empty() {
            checks.push(ImageCheck {
                instance_id: row.instance_id.to_string(),
                image: String::new(),
                recorded: row.image_digest.clone(),
                found: None,
                verdict: ImageVerdict::Unnamed,
            });
            continue;
        }
        if !found.contains_key(&row.image) {
            let mut id = runtime.image_id(&row.image).await?;
            let mut pulled = false;
            if id.is_none() && pull {
                let mut sink = |_: &[u8]| {};
                if runtime.pull_image(&row.image, &mut sink).await? {
                    id = runtime.image_id(&row.image).await?;
                    pulled = id.is_some();
                }
            }
            found.insert(row.image.clone(), (id, pulled));
        }
        let (id, pulled) = found.get(&row.image).cloned().unwrap_or_default();
        let verdict = match (&id, &row.image_digest) {
            (None, _) => ImageVerdict::Missing,
            (Some(id), Some(recorded)) if id != recorded => ImageVerdict::DigestChanged,
            _ if pulled => ImageVerdict::Pulled,
            _ => ImageVerdict::Present,
        };
        checks.push(ImageCheck {
            instance_id: row.instance_id.to_string(),
            image: row.image.clone(),
            recorded: row.image_digest.clone(),
            found: id,
            verdict,
        });
    }
    Ok(checks)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kiln_schema::InstanceId;
    use kiln_testkit::runtime::ScriptedRuntime;

    use super::*;

    fn row(id: &str, image: &str, digest: Option<&str>) -> ReleaseInstance {
        ReleaseInstance {
            image: image.into(),
            image_digest: digest.map(Into::into),
            ..ReleaseInstance::new(InstanceId::new(id).unwrap_or_else(|e| panic!("{e}")))
        }
    }

    #[tokio::test]
    async fn a_missing_image_and_a_moved_tag_are_found_and_a_good_one_passes() {
        let runtime = Arc::new(ScriptedRuntime::new());
        runtime.add_image("kiln-env/d:a");
        runtime.add_image("kiln-env/d:b");
        let id_a = runtime
            .image("kiln-env/d:a")
            .map(|i| i.id)
            .unwrap_or_default();
        let rows = [
            row("o__r-1", "kiln-env/d:a", Some(&id_a)),
            row("o__r-2", "kiln-env/d:b", Some("sha256:recorded-before")),
            row("o__r-3", "kiln-env/d:gone", None),
            row("o__r-4", "", None),
            row("o__r-5", "kiln-env/d:a", None),
        ];
        let checks = check_images(runtime.as_ref(), &rows, false)
            .await
            .unwrap_or_default();
        let verdicts: Vec<ImageVerdict> = checks.iter().map(|c| c.verdict).collect();
        assert_eq!(
            verdicts,
            [
                ImageVerdict::Present,
                ImageVerdict::DigestChanged,
                ImageVerdict::Missing,
                ImageVerdict::Unnamed,
                ImageVerdict::Present,
            ]
        );
        let problem = checks[1].problem().unwrap_or_default();
        assert!(
            problem.contains("not the recorded sha256:recorded-before"),
            "{problem}"
        );
        assert_eq!(checks[0].problem(), None);
    }
}
