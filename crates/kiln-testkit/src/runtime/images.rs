//! The image bookkeeping of the scripted runtime: images by tag, the dangling ones a moved tag
//! left behind, resolution by tag or id as the engine does it, and the image lists it answers.

use std::collections::BTreeMap;

use kiln_core::runtime::LABEL_SCRATCH;
use kiln_core::{ContainerId, ImageInfo};

use super::files::CopiedIn;

/// How an image came to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageOrigin {
    /// Put there by the test ([`ScriptedRuntime::add_image`](super::ScriptedRuntime::add_image)).
    Seeded,
    /// Built from a Dockerfile
    /// ([`ContainerRuntime::build_image`](kiln_core::ContainerRuntime::build_image)).
    Built,
    /// Committed from a container.
    Committed(ContainerId),
    /// Pulled from a registry.
    Pulled,
    /// A further name of another image.
    Tagged(String),
    /// Imported from a root file system.
    Imported,
}

/// An image the runtime holds.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its tag (`repo:tag`).
    pub tag: String,
    /// Its id (`sha256:...`).
    pub id: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Environment of every container made from it.
    pub env: Vec<(String, String)>,
    /// How it came to be.
    pub origin: ImageOrigin,
    /// Files it holds: the archives copied into the containers it was committed from.
    pub files: Vec<CopiedIn>,
    /// Its file system: every file's absolute path and content, as its containers left it.
    pub fs: BTreeMap<String, Vec<u8>>,
    /// The scripts that made it: those run in the containers it was committed from, after
    /// their image's own.
    pub history: Vec<String>,
    /// The id of the image its container was made from (committed images); empty otherwise.
    pub parent: String,
    /// When it was made, in the runtime's own count (later images count higher).
    pub created: i64,
    /// Bytes on disk, its parent's included: 1 MiB per image in its line.
    pub size: i64,
}

/// The images the runtime holds: by tag, and those a tag moved away from (the engine's
/// dangling images), which still answer to their id.
#[derive(Debug, Default)]
pub(super) struct Images {
    tagged: BTreeMap<String, Image>,
    dangling: Vec<Image>,
}

impl Images {
    /// The image under `tag`.
    pub(super) fn tagged(&self, tag: &str) -> Option<&Image> {
        self.tagged.get(tag)
    }

    /// The tags of every image, sorted.
    pub(super) fn tags(&self) -> Vec<String> {
        self.tagged.keys().cloned().collect()
    }

    /// The image `reference` names: a tag, or an image's id (`sha256:…`), tagged or left
    /// dangling by a tag that moved, as the engine resolves them.
    pub(super) fn find(&self, reference: &str) -> Option<&Image> {
        self.tagged.get(reference).or_else(|| {
            self.tagged
                .values()
                .chain(&self.dangling)
                .find(|image| image.id == reference)
        })
    }

    /// Puts `image` under its tag; an image the tag named before becomes dangling.
    pub(super) fn put(&mut self, image: Image) {
        if let Some(old) = self.tagged.insert(image.tag.clone(), image)
            && !self.tagged.values().any(|i| i.id == old.id)
        {
            self.dangling.push(old);
        }
    }

    /// Forgets the tag `tag` and the image under it.
    pub(super) fn remove(&mut self, tag: &str) {
        self.tagged.remove(tag);
    }

    /// The images `keep` selects, once each, with the tags that still name them.
    pub(super) fn infos(&self, keep: impl Fn(&Image) -> bool) -> Vec<ImageInfo> {
        let mut by_id: BTreeMap<String, ImageInfo> = BTreeMap::new();
        for image in self.tagged.values().chain(&self.dangling) {
            if !keep(image) {
                continue;
            }
            let info = by_id.entry(image.id.clone()).or_insert_with(|| ImageInfo {
                id: image.id.clone(),
                labels: image.labels.clone(),
                size: image.size,
                created: image.created,
                parent: image.parent.clone(),
                ..ImageInfo::default()
            });
            if self
                .tagged
                .get(&image.tag)
                .is_some_and(|i| i.id == image.id)
            {
                info.tags.push(image.tag.clone());
            }
        }
        by_id.into_values().collect()
    }

    /// Removes the leftovers labelled `label=value` as the engine's cleanup does: the dangling
    /// images, and the tagged scratch images ([`LABEL_SCRATCH`]); returns how many.
    pub(super) fn remove_leftovers(&mut self, label: &str, value: &str) -> usize {
        let labelled = |image: &Image| image.labels.get(label).map(String::as_str) == Some(value);
        let dangling_before = self.dangling.len();
        self.dangling.retain(|image| !labelled(image));
        let mut removed = dangling_before - self.dangling.len();
        let scratch: Vec<String> = self
            .tagged
            .values()
            .filter(|image| labelled(image) && image.labels.contains_key(LABEL_SCRATCH))
            .map(|image| image.tag.clone())
            .collect();
        for tag in scratch {
            self.tagged.remove(&tag);
            removed += 1;
        }
        removed
    }
}
