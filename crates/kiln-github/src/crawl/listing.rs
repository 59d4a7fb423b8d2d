//! Budgets of paged listings: what one listing (the pages of one search, of one issue's
//! comments, of a whole discovery) may take across all its pages, so that a server whose every
//! page names a next one costs a bounded number of requests, bytes and entries, not only a
//! bounded size per page.

use super::error::CrawlError;

/// The largest answer kiln reads; a larger one is refused (GitHub's pages of 100 pull
/// requests with their bodies are a few megabytes).
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// What one paged listing may take across all its pages. GitHub's search gives at most 1,000
/// results of one query (10 pages of 100), so the budgets of a search are ten times what
/// GitHub itself would send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListingBudget {
    /// Pages, that is requests (a page may hold no entry and still name a next page).
    pub pages: u64,
    /// Entries (search results, comments) across all pages.
    pub entries: u64,
    /// Bytes of the answers across all pages.
    pub bytes: u64,
}

impl ListingBudget {
    /// One search of a repository's merged pull requests (one segment of its window): 100
    /// pages, 10,000 pull requests, and 256 MiB (a page of 100 pull requests with their
    /// bodies, files, closing issues and their first comments is a few megabytes; four pages
    /// at the 64 MiB cap of one answer).
    pub const PULL_REQUEST_SEARCH: Self = Self {
        pages: 100,
        entries: 10_000,
        bytes: 256 << 20,
    };

    /// One search of repositories (one star range of a discovery), as
    /// [`ListingBudget::PULL_REQUEST_SEARCH`].
    pub const REPOSITORY_SEARCH: Self = Self::PULL_REQUEST_SEARCH;

    /// A whole discovery, over all its star ranges: 200,000 repositories (about every public
    /// repository of a major language with twenty stars or more), 10,000 pages (their 2,000
    /// pages of results and the first pages of the ranges split), and 512 MiB (a page of 100
    /// repositories with their languages is tens of kilobytes).
    pub const DISCOVERY: Self = Self {
        pages: 10_000,
        entries: 200_000,
        bytes: 512 << 20,
    };

    /// The comments of one issue: 100 pages, 10,000 comments (GitHub takes no comment past
    /// about 2,500 on one issue), and 128 MiB (a comment holds at most 65,536 characters; most
    /// hold a few hundred).
    pub const ISSUE_COMMENTS: Self = Self {
        pages: 100,
        entries: 10_000,
        bytes: 128 << 20,
    };
}

/// One paged listing under way: what its pages took so far, against its budget.
#[derive(Debug, Clone)]
pub struct Listing {
    what: String,
    budget: ListingBudget,
    pages: u64,
    entries: u64,
    bytes: u64,
}

impl Listing {
    /// A listing of `what` (a noun phrase: `the pull request search of owner/name`) with
    /// `budget`.
    #[must_use]
    pub fn new(what: impl Into<String>, budget: ListingBudget) -> Self {
        Self {
            what: what.into(),
            budget,
            pages: 0,
            entries: 0,
            bytes: 0,
        }
    }

    /// The error of a listing past `budget` (`100 pages`, `10000 entries`).
    fn over(&self, budget: String) -> CrawlError {
        CrawlError::OverBudget {
            what: self.what.clone(),
            budget,
            page: self.pages,
        }
    }

    fn bytes_budget(&self) -> String {
        let bytes = self.budget.bytes;
        if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
            format!("{} MiB of answers", bytes >> 20)
        } else {
            format!("{bytes} bytes of answers")
        }
    }

    /// Counts a page about to be asked for, and returns the most bytes its answer may have:
    /// the rest of the byte budget, at most [`MAX_ANSWER_BYTES`].
    ///
    /// # Errors
    /// When the page would be past the page budget, or no byte of the budget is left.
    pub fn start_page(&mut self) -> Result<usize, CrawlError> {
        self.pages += 1;
        if self.pages > self.budget.pages {
            return Err(self.over(format!("{} pages", self.budget.pages)));
        }
        let left = self.budget.bytes.saturating_sub(self.bytes);
        if left == 0 {
            return Err(self.over(self.bytes_budget()));
        }
        Ok(usize::try_from(left).map_or(MAX_ANSWER_BYTES, |left| left.min(MAX_ANSWER_BYTES)))
    }

    /// Counts the bytes of a page's answer.
    pub fn add_bytes(&mut self, bytes: usize) {
        self.bytes = self.bytes.saturating_add(bytes as u64);
    }

    /// The error of a page whose answer went past the rest of the byte budget.
    #[must_use]
    pub fn over_bytes(&self) -> CrawlError {
        self.over(self.bytes_budget())
    }

    /// Counts the entries of a page.
    ///
    /// # Errors
    /// When they take the listing past its entry budget.
    pub fn add_entries(&mut self, entries: usize) -> Result<(), CrawlError> {
        self.entries = self.entries.saturating_add(entries as u64);
        if self.entries > self.budget.entries {
            return Err(self.over(format!("{} entries", self.budget.entries)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_budget_stops_its_listing() {
        let budget = ListingBudget {
            pages: 3,
            entries: 250,
            bytes: 1000,
        };
        let mut pages = Listing::new("the pages", budget);
        for _ in 0..3 {
            assert!(pages.start_page().is_ok());
        }
        let error = pages.start_page().map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            error,
            "page through the pages: it goes past its budget of 3 pages (at page 4)"
        );

        let mut entries = Listing::new("the entries", budget);
        assert!(entries.add_entries(200).is_ok());
        assert!(entries.add_entries(50).is_ok());
        assert!(
            entries
                .add_entries(1)
                .unwrap_err()
                .to_string()
                .contains("250 entries")
        );

        let mut bytes = Listing::new("the bytes", budget);
        assert_eq!(bytes.start_page().unwrap_or_default(), 1000);
        bytes.add_bytes(600);
        // The next page may be no larger than what is left.
        assert_eq!(bytes.start_page().unwrap_or_default(), 400);
        bytes.add_bytes(400);
        let error = bytes.start_page().map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains("budget of 1000 bytes of answers (at page 3)"),
            "{error}"
        );
    }
}
