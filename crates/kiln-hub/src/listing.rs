//! What a repository listing gives and what one listing may read across its pages.

use serde::Deserialize;

/// An entry of a repository listing.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TreeEntry {
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Path in the repository.
    pub path: String,
}

/// What one listing ([`Hub::list_tree`](crate::Hub::list_tree)) may read across all its
/// pages; past either bound it is [`HubError::OverBudget`](crate::HubError::OverBudget), so a
/// Hub whose every page names another next page costs bounded memory and time, not only a
/// bounded number of pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingBudget {
    /// Entries across all pages.
    pub entries: usize,
    /// Bytes across all pages: the answers' bodies and their `next` links.
    pub bytes: usize,
}

impl Default for ListingBudget {
    /// 500,000 entries and 256 MiB. The Hub advises fewer than 100,000 files per repository
    /// (and 10,000 per folder); a page of 1,000 entries is about 300 KB, so the whole tree of
    /// five times that repository is about 150 MB of answers. kiln lists its own release
    /// folders, a few thousand files.
    fn default() -> Self {
        Self {
            entries: 500_000,
            bytes: 256 << 20,
        }
    }
}

/// The most pages of one listing kiln follows.
pub(crate) const MAX_PAGES: usize = 10_000;
