//! Analytics over releases with polars: dedupe against earlier releases and split statistics.

use kiln_schema::ReleaseInstance;
use kiln_store::analytics::{Published, dedupe, release_tags, split_ids, split_stats};
use kiln_store::write_release;

use crate::samples;

fn row(id: &str, repo: &str, pull: Option<&str>) -> ReleaseInstance {
    let mut row = samples::release(id, repo);
    row.pull_number = pull.map(str::to_string);
    // A fix of its own, so that only the keys a test is about match.
    row.patch = format!("diff --git a/{id} b/{id}\n+{id}\n");
    row
}

/// `(id, key, release, duplicated id)` of each row left out.
fn left_out(deduped: &kiln_store::analytics::Deduped) -> Vec<(&str, &str, &str, &str)> {
    deduped
        .duplicates
        .iter()
        .map(|d| {
            (
                d.instance_id.as_str(),
                d.key.as_str(),
                d.release.as_str(),
                d.duplicates.as_str(),
            )
        })
        .collect()
}

#[test]
fn dedupe_leaves_out_what_earlier_releases_published() {
    let tmp = tempfile::tempdir().unwrap();
    let releases = tmp.path();
    write_release(
        &releases.join("2024-08"),
        "test",
        &[
            row("o__a-1", "o/a", Some("1")),
            row("o__b-2", "o/b", Some("2")),
        ],
        1,
    )
    .unwrap();
    write_release(
        &releases.join("2024-09"),
        "test",
        &[row("o__c-3", "o/c", Some("3"))],
        10,
    )
    .unwrap();
    // A later release counts too (a month refreshed again after later ones were released);
    // the release being written does not.
    write_release(
        &releases.join("2024-11"),
        "test",
        &[row("o__d-4", "o/d", Some("4"))],
        10,
    )
    .unwrap();
    assert_eq!(
        release_tags(releases).unwrap(),
        ["2024-08", "2024-09", "2024-11"]
    );
    write_release(
        &releases.join("2024-10"),
        "test",
        &[row("o__z-9", "o/z", Some("9"))],
        10,
    )
    .unwrap();
    let published = Published::except(releases, "2024-10", "test").unwrap();
    assert_eq!(published.len(), 4);

    let fresh = vec![
        row("o__a-1", "o/a", Some("1")),       // the same id as 2024-08
        row("renamed__b-2", "o/b", Some("2")), // the same pull request under another id
        row("o__c-30", "o/c", None),           // no pull number: never matches by pull
        row("o__d-4", "o/d", Some("4")),       // published by a later release
        row("o__e-5", "o/e", Some("5")),       // new
        row("o__e-5-again", "o/e", Some("5")), // the same pull request twice in this export
        row("o__c-30", "o/c", None),           // the same id twice in this export
        row("o__z-9", "o/z", Some("9")),       // this release's own rows are not others'
    ];
    let deduped = dedupe(&fresh, &published, "2024-10").unwrap();
    assert_eq!(deduped.keep, [2, 4, 7]);
    assert_eq!(
        left_out(&deduped),
        [
            ("o__a-1", "instance_id", "2024-08", "o__a-1"),
            ("renamed__b-2", "pull_request", "2024-08", "o__b-2"),
            ("o__d-4", "instance_id", "2024-11", "o__d-4"),
            ("o__e-5-again", "repeated", "2024-10", "o__e-5"),
            ("o__c-30", "repeated", "2024-10", "o__c-30"),
        ]
    );

    // Nothing published where there is no other release.
    let none = Published::except(&releases.join("nothing"), "2024-01", "test").unwrap();
    assert!(none.is_empty());
    assert_eq!(dedupe(&fresh[..1], &none, "2024-01").unwrap().keep, [0]);
}

#[test]
fn split_statistics_count_and_summarise_the_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut rows = Vec::new();
    for (i, (repo, language, month, f2p)) in [
        ("o/a", "python", "2024-09", 1),
        ("o/a", "python", "2024-09", 3),
        ("o/b", "rust", "2024-10", 5),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = row(&format!("x-{i}"), repo, Some(&i.to_string()));
        r.language = language.into();
        r.created_at = format!("{month}-15T00:00:00Z");
        r.FAIL_TO_PASS = (0..f2p).map(|t| format!("t{t}")).collect();
        r.patch = "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n-a\n+b\n+c\n".repeat(i + 1);
        r.launch_seconds = 10.0 * (i + 1) as f64;
        rows.push(r);
    }
    write_release(dir, "test", &rows, 2).unwrap();
    let stats = split_stats(dir, "test").unwrap();
    assert_eq!(stats.rows, 3);
    assert_eq!(stats.repositories, 2);
    assert_eq!(
        stats.by_language,
        [("python".to_string(), 2), ("rust".to_string(), 1)]
    );
    assert_eq!(
        stats.by_repo,
        [("o/a".to_string(), 2), ("o/b".to_string(), 1)]
    );
    assert_eq!(
        stats.by_month,
        [("2024-09".to_string(), 2), ("2024-10".to_string(), 1)]
    );
    assert_eq!(
        (
            stats.fail_to_pass.min,
            stats.fail_to_pass.median,
            stats.fail_to_pass.max
        ),
        (1.0, 3.0, 5.0)
    );
    assert!((stats.fail_to_pass.mean - 3.0).abs() < 1e-9);
    assert_eq!((stats.patch_lines.min, stats.patch_lines.max), (3.0, 9.0));
    assert!((stats.launch_seconds.mean - 20.0).abs() < 1e-9);
    assert_eq!(
        split_ids(dir, "test")
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        ["x-0", "x-1", "x-2"]
    );
    // A split without shards has empty statistics.
    assert_eq!(split_stats(dir, "lite").unwrap().rows, 0);
}

/// A backport (the same fix of the same issue under another pull request, its hunks at other
/// lines) is left out, against a published release and within one export; another fix of the
/// same issue is not.
#[test]
fn dedupe_leaves_out_a_backport_of_a_published_fix() {
    let fix = |id: &str, repo: &str, pull: &str, at: u32, change: &str| {
        let mut row = row(id, repo, Some(pull));
        row.issue_numbers = vec!["12".into()];
        row.patch = format!(
            "diff --git a/src/x.py b/src/x.py\nindex {at:07}..{:07} 100644\n--- a/src/x.py\n+++ b/src/x.py\n@@ -{at},3 +{at},3 @@\n context {at}\n-    return a\n+    return {change}\n",
            at + 1
        );
        row
    };
    let tmp = tempfile::tempdir().unwrap();
    let releases = tmp.path();
    write_release(
        &releases.join("2024-08"),
        "test",
        &[fix("o__f-6", "o/f", "6", 10, "a + 1")],
        10,
    )
    .unwrap();
    let published = Published::except(releases, "2024-09", "test").unwrap();
    let fresh = vec![
        fix("o__f-7", "O/F", "7", 42, "a + 1"), // the backport of o__f-6
        fix("o__f-8", "o/f", "8", 10, "a + 2"), // another fix of the same issue
        fix("o__g-1", "o/g", "1", 5, "a * 2"),  // new
        fix("o__g-2", "o/g", "2", 50, "a * 2"), // its backport, in the same export
    ];
    let deduped = dedupe(&fresh, &published, "2024-09").unwrap();
    assert_eq!(deduped.keep, [1, 2]);
    assert_eq!(
        left_out(&deduped),
        [
            ("o__f-7", "same-fix", "2024-08", "o__f-6"),
            ("o__g-2", "repeated", "2024-09", "o__g-1"),
        ]
    );
}
