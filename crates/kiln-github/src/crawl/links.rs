//! Issues a pull request body says it closes, by GitHub's closing keywords.
//!
//! GitHub's own resolution (`closingIssuesReferences`) covers pull requests into the default
//! branch and manual links; the body is read as well, for pull requests into other branches and
//! for repositories whose history predates the feature. The grammar is GitHub's: one of
//! close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved, an optional colon, then
//! `#N`, `owner/repo#N` or an issue URL; each issue needs its own keyword.

use std::sync::LazyLock;

use regex::Regex;

static CLOSING: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+(?:(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)#|https?://github\.com/(?P<url_owner>[A-Za-z0-9_.-]+)/(?P<url_repo>[A-Za-z0-9_.-]+)/issues/|#)(?P<number>[0-9]{1,9})\b",
    )
    .ok()
});

/// Numbers of the issues of `repo` (`owner/name`, compared case-insensitively) that `body`
/// closes by keyword, in order of first mention, without repeats.
#[must_use]
pub fn closing_keyword_issues(body: &str, repo: &str) -> Vec<u64> {
    let Some(regex) = CLOSING.as_ref() else {
        return Vec::new();
    };
    let mut numbers = Vec::new();
    for captures in regex.captures_iter(body) {
        let owner = captures
            .name("owner")
            .or_else(|| captures.name("url_owner"));
        let name = captures.name("repo").or_else(|| captures.name("url_repo"));
        if let (Some(owner), Some(name)) = (owner, name)
            && !format!("{}/{}", owner.as_str(), name.as_str()).eq_ignore_ascii_case(repo)
        {
            continue;
        }
        if let Some(number) = captures
            .name("number")
            .and_then(|n| n.as_str().parse().ok())
            && !numbers.contains(&number)
        {
            numbers.push(number);
        }
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::closing_keyword_issues;

    #[test]
    fn keywords_link_issues_of_the_same_repository() {
        let body = "Fixes #12.\n\nAlso resolves: kiln/calc#7, closes https://github.com/Kiln/Calc/issues/9 \
                    and fixes other/repo#3. Mentions #44 without a keyword; FIXED #12 again; prefix#5";
        assert_eq!(closing_keyword_issues(body, "kiln/calc"), vec![12, 7, 9]);
        assert!(closing_keyword_issues("Refactors the fixture loader (#8)", "a/b").is_empty());
        assert!(closing_keyword_issues("fixes#8 prefixes #9 suffix", "a/b").is_empty());
    }
}
