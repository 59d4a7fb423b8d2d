//! The dataset card's body: what the release holds, how its rows were made, and its columns.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kiln_schema::{Difficulty, ReleaseInstance, Row as _};
use kiln_store::analytics::{Distribution, SplitStats};

use crate::release::ReleaseManifest;

/// Rows of a count table shown before the rest is summed up as "others".
const TOP: usize = 20;

/// Escapes a value for a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn count_table(out: &mut String, what: &str, counts: &[(String, u64)]) {
    let _ = writeln!(out, "| {what} | rows |\n|---|---:|");
    for (name, n) in counts.iter().take(TOP) {
        let _ = writeln!(out, "| {} | {n} |", cell(name));
    }
    if counts.len() > TOP {
        let rest: u64 = counts[TOP..].iter().map(|(_, n)| n).sum();
        let _ = writeln!(out, "| {} others | {rest} |", counts.len() - TOP);
    }
    out.push('\n');
}

/// A figure with one decimal, or none when it is whole.
fn figure(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

fn distribution_row(out: &mut String, what: &str, d: &Distribution) {
    let _ = writeln!(
        out,
        "| {what} | {} | {} | {} | {} |",
        figure(d.min),
        figure(d.median),
        figure(d.mean),
        figure(d.max)
    );
}

/// What the main split holds: languages, repositories, months, sizes and times.
fn contents(out: &mut String, split: &str, stats: &SplitStats) {
    let _ = writeln!(
        out,
        "## Contents of `{split}`\n\n{} instances from {} repositories.\n",
        stats.rows, stats.repositories
    );
    if stats.rows == 0 {
        return;
    }
    count_table(out, "language", &stats.by_language);
    count_table(out, "repository", &stats.by_repo);
    count_table(out, "month (created_at)", &stats.by_month);
    out.push_str("| per instance | min | median | mean | max |\n|---|---:|---:|---:|---:|\n");
    distribution_row(out, "FAIL_TO_PASS tests", &stats.fail_to_pass);
    distribution_row(out, "PASS_TO_PASS tests", &stats.pass_to_pass);
    distribution_row(out, "gold patch lines changed", &stats.patch_lines);
    distribution_row(out, "launch seconds", &stats.launch_seconds);
    distribution_row(out, "validation seconds", &stats.validate_seconds);
    out.push('\n');
}

/// The funnel, the failure classes, the rows left out, and what made the rows.
fn provenance(out: &mut String, manifest: &ReleaseManifest) {
    let f = &manifest.funnel;
    let released = manifest
        .splits
        .get(&manifest.main_split)
        .map_or(0, |s| s.rows);
    out.push_str("## How the rows were made\n\n");
    let _ = writeln!(
        out,
        "Run `{}` of kiln {} (config hash `{}`, schema version {}), exported {}.\n",
        manifest.run_id,
        manifest.kiln_version,
        manifest.config_hash,
        manifest.schema_version,
        manifest.exported_at
    );
    out.push_str("| stage | instances |\n|---|---:|\n");
    for (stage, n) in [
        ("pull requests", f.pull_requests),
        (
            "candidates (an issue resolved, tests changed)",
            f.candidates,
        ),
        ("kept by the filter", f.kept),
        ("for Linux", f.platform),
        ("environment built", f.built),
        ("validated", f.validated),
        ("released (not published before)", released as u64),
    ] {
        let _ = writeln!(out, "| {stage} | {n} |");
    }
    out.push('\n');
    out.push_str(
        "What the tests of a row see of its repository is the commit, plus the test patch \
         (plus the gold patch), checked by what each change did, not by its text. A row is \
         released only when its gold patch, applied to the base commit, changes code and not the \
         tests that judge it: a change to a file the test patch changes, a test file, a test \
         runner's configuration (`conftest.py` at any depth, `pytest.ini`, `jest.config.*`, \
         `.mocharc*`, `.pth` files, ...) or a test setting of a shared manifest compared as a \
         document (`[tool:pytest]` with its continuation lines, `pytest11` entry points, Cargo's \
         `[[test]]`, `package.json`'s runner keys and test script) is rejected as \
         `gold-edits-tests`, and one that changes only comments, blank lines or documentation as \
         `gold-without-code`, before any test runs. The environment only adds dependencies: an \
         environment that changed a tracked file (but a lockfile its package manager rewrites) \
         or added test configuration to the checkout is no environment, and every validation \
         run checks its container again before its tests start.\n\n",
    );
    if !f.dropped.is_empty() {
        out.push_str("Pull requests the crawl dropped, by reason:\n\n| reason | pull requests |\n|---|---:|\n");
        for (reason, n) in &f.dropped {
            let _ = writeln!(out, "| {} | {n} |", cell(reason));
        }
        out.push('\n');
    }
    if !f.failures.is_empty() {
        out.push_str("Instances that did not validate, by where they stopped and failure class:\n\n| stopped at | failure class | instances |\n|---|---|---:|\n");
        for (state, classes) in &f.failures {
            for (class, n) in classes {
                let _ = writeln!(out, "| {state} | {} | {n} |", cell(class));
            }
        }
        out.push('\n');
    }
    if !manifest.duplicates.is_empty() {
        let _ = writeln!(
            out,
            "{} validated instances were left out as duplicates of published or kept ones (`release.json` lists them all):\n",
            manifest.duplicates.len()
        );
        for d in manifest.duplicates.iter().take(TOP) {
            let _ = writeln!(
                out,
                "- `{}`: same {} as `{}` in release {}",
                d.instance_id,
                match d.key.as_str() {
                    "instance_id" => "id",
                    "pull_request" => "pull request",
                    "same-fix" => "fix (the same issue and change: a backport)",
                    _ => "id, pull request or fix",
                },
                d.duplicates,
                d.release
            );
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{} environment images are named in `image`{}.\n",
        manifest.images.len(),
        manifest.image_registry.as_deref().map_or_else(
            || " (local to the machine that built them)".to_string(),
            |r| format!(", published to `{r}`")
        )
    );
}

/// `counts` as `name: n` pairs, most first (then by name), joined by `, `.
fn tally(counts: BTreeMap<String, usize>) -> String {
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
        .iter()
        .map(|(name, n)| format!("{name}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many of `rows` give each value of `value`.
fn count_by<F: Fn(&ReleaseInstance) -> Vec<String>>(
    rows: &[ReleaseInstance],
    value: F,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for row in rows {
        for key in value(row) {
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}

/// The quality signals of the main split's rows: each one's values over the rows, and what it
/// means.
fn quality(out: &mut String, split: &str, rows: &[ReleaseInstance]) {
    if rows.is_empty() {
        return;
    }
    let runs = count_by(rows, |r| {
        vec![format!(
            "before {}/{}, after {}/{}",
            r.identical_runs_before, r.repeats, r.identical_runs_after, r.repeats
        )]
    });
    let leaks = count_by(rows, |r| {
        vec![if r.solution_leak { "leak" } else { "none" }.to_string()]
    });
    let mut bands: BTreeMap<String, usize> =
        [Difficulty::Easy, Difficulty::Medium, Difficulty::Hard]
            .iter()
            .map(|d| (d.as_str().to_string(), 0))
            .collect();
    for (band, n) in count_by(rows, |r| {
        vec![
            r.difficulty
                .map_or("unknown", Difficulty::as_str)
                .to_string(),
        ]
    }) {
        bands.insert(band, n);
    }
    let collected = count_by(rows, |r| {
        vec![match r.tests_collected {
            None => "no definitions read".to_string(),
            Some(share) if share >= 1.0 => "all".to_string(),
            Some(share) if share >= 0.9 => "90–99 %".to_string(),
            Some(_) => "under 90 %".to_string(),
        }]
    });
    let whole = count_by(rows, |r| {
        vec![
            match (&r.whole_suite, r.broken_outside_scope.is_empty()) {
                (None, _) => "not run",
                (Some(_), true) => "nothing broken",
                (Some(_), false) => "breaks tests elsewhere",
            }
            .to_string(),
        ]
    });
    let judges = count_by(rows, |r| {
        vec![format!(
            "{} ({})",
            r.filter_judge.as_deref().unwrap_or("no filter"),
            r.filter_label.as_deref().unwrap_or("-")
        )]
    });
    let flags = count_by(rows, |r| {
        if r.filter_flags.is_empty() {
            vec!["none".to_string()]
        } else {
            r.filter_flags.clone()
        }
    });
    let _ = writeln!(
        out,
        "## Quality signals\n\nEvidence per row of how far it can be trusted, in the columns named here (and in each \
         Harbor task's `[metadata]`), counted over the {} rows of `{split}`:\n",
        rows.len()
    );
    out.push_str("| signal | rows | meaning |\n|---|---|---|\n");
    let signals = [
        (
            "`identical_runs_before`, `identical_runs_after` (of `repeats`)",
            tally(runs),
            "Validation runs each side `repeats` times in fresh containers: `before` with the test patch alone, \
             `after` with the gold patch too. Each counts the runs whose status of every test is that of the \
             side's first run, the first included; fewer than `repeats` means a run ended otherwise (a test \
             that does not repeat, dropped from both lists as flaky).",
        ),
        (
            "`solution_leak` (`solution_leak_matches`)",
            tally(leaks),
            "Whether the problem statement or the hints already show the fix, in their fenced code blocks or \
             inline code spans: a line the gold patch adds (12 characters or more, not a comment, not a line it \
             also removes, not in documentation), or a definition (`def name`, `fn name`, ...) of a name the \
             patch introduces. The matches are listed.",
        ),
        (
            "`difficulty` (`difficulty_measures`)",
            tally(bands),
            "A band from the gold patch (documentation not counted) and the tests it fixes: lines changed \
             (≤ 6, ≤ 30, more), hunks (1, ≤ 3, more), files (1, 2, more), functions touched (≤ 1, ≤ 3, more: \
             the function or class each changed line is in, by the nearest definition above it in its hunk or \
             git's hunk header, and those the changed lines define) and FAIL_TO_PASS \
             tests (≤ 2, ≤ 10, more) give 0, 1 or 2 points each; 0–1 points is `easy`, 7–10 `hard`, \
             `medium` between. The bounds are set by hand, not fitted to human labels.",
        ),
        (
            "`tests_collected` (`tests_defined`)",
            tally(collected),
            "The share of the tests the test patch's files define that the runs with the gold patch reported. \
             Where the runner lists tests (pytest's `--collect-only`, in the build with both patches), the \
             definitions are the ids it lists; otherwise, and for a file it could not collect, they are read \
             from the files at the patched commit in the row's language (Python `def \
             test…`, Go `func Test…`, Rust `#[test]` functions, JUnit `@Test` methods, literal JavaScript and \
             TypeScript `it`/`test` titles) and found among the reported test ids by name; a module the \
             environment could not import shows here as missing tests. Validation rejects a row under \
             `[stages.validate] min_collected` (0.9 by default); null where no definition is read (C and \
             C++ suites, titles built at run time).",
        ),
        (
            "`whole_suite` (`broken_outside_scope`)",
            tally(whole),
            "Where launch narrowed the tests to those the test patch touches (`test_scope`), one validated \
             row in `[stages.validate] full_suite_every` (10 by default, by a hash of its id) also ran the \
             whole suite once with the test patch and once with both patches: what each run reported, and \
             the tests outside the narrowed scope that passed with the test patch alone and fail with the \
             fix (a fix that breaks another part of the suite). `not run` elsewhere.",
        ),
        (
            "`filter_judge` (`filter_label`, `filter_reason`)",
            tally(judges),
            "The filter's verdict on the issue: `heuristic` (deterministic checks: an issue long enough to act \
             on that reports a defect, is no feature request or question, and holds neither a patch nor most \
             of the fix's lines) or the models of the LM \
             judge (clarity, tests needing unstated requirements, a leaked solution), with its label and \
             reason; `filter_fallback` says why the heuristic judged when an LM was configured.",
        ),
        (
            "`filter_flags`",
            tally(flags),
            "Confounders the LM judge raised: tests asserting exact strings the issue does not give, network \
             access, several issues in one pull request, an issue whose substance is an image.",
        ),
    ];
    for (signal, values, meaning) in signals {
        let _ = writeln!(out, "| {signal} | {} | {} |", cell(&values), cell(meaning));
    }
    out.push('\n');
}

/// The columns of the rows, with their types and meaning.
fn columns(out: &mut String) {
    out.push_str("## Columns\n\n| column | type | meaning |\n|---|---|---|\n");
    for column in ReleaseInstance::columns() {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            column.name,
            column.ty.arrow_name(),
            cell(&column.description())
        );
    }
}

/// The card's body below the split table: `rows` are the main split's.
pub(super) fn body(
    manifest: &ReleaseManifest,
    rows: &[ReleaseInstance],
    intro: &str,
    extra: &str,
) -> String {
    let mut out = String::new();
    out.push_str(intro.trim_end());
    out.push_str("\n\n");
    for (name, frozen) in &manifest.frozen {
        let _ = writeln!(
            out,
            "- `{name}` is frozen: {} ({} instances{}).",
            frozen.choice,
            frozen.instance_ids.len(),
            if frozen.not_published.is_empty() {
                String::new()
            } else {
                format!(", {} not published yet", frozen.not_published.len())
            }
        );
    }
    if !manifest.frozen.is_empty() {
        out.push('\n');
    }
    if let Some(main) = manifest.splits.get(&manifest.main_split) {
        contents(&mut out, &manifest.main_split, &main.stats);
    }
    quality(&mut out, &manifest.main_split, rows);
    provenance(&mut out, manifest);
    out.push_str(extra.trim());
    out.push_str("\n\n");
    columns(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use kiln_schema::{Difficulty, InstanceId, ReleaseInstance};

    use super::quality;

    #[test]
    fn the_quality_table_counts_each_signal_over_the_rows() {
        let row = |id: &str| ReleaseInstance {
            repeats: 3,
            identical_runs_before: 3,
            identical_runs_after: 3,
            difficulty: Some(Difficulty::Easy),
            tests_defined: 4,
            tests_collected: Some(1.0),
            filter_judge: Some("heuristic".into()),
            filter_label: Some("ok".into()),
            ..ReleaseInstance::new(InstanceId::new(id).unwrap())
        };
        let rows = vec![
            row("o__r-1"),
            ReleaseInstance {
                identical_runs_after: 2,
                solution_leak: true,
                solution_leak_matches: vec!["return a | b".into()],
                difficulty: Some(Difficulty::Hard),
                tests_defined: 0,
                tests_collected: None,
                filter_judge: None,
                filter_label: None,
                filter_flags: vec!["network-access".into(), "image-only".into()],
                whole_suite: Some("before: 9 passed; after: 8 passed, 1 failed".into()),
                broken_outside_scope: vec!["tests/test_b.py::test_x".into()],
                ..row("o__r-2")
            },
            ReleaseInstance {
                whole_suite: Some("before: 9 passed; after: 9 passed".into()),
                ..row("o__r-3")
            },
        ];
        let mut out = String::new();
        quality(&mut out, "test", &rows);
        for line in [
            "counted over the 3 rows of `test`",
            "| `identical_runs_before`, `identical_runs_after` (of `repeats`) | before 3/3, after 3/3: 2, before 3/3, after 2/3: 1 |",
            "| `solution_leak` (`solution_leak_matches`) | none: 2, leak: 1 |",
            "| `difficulty` (`difficulty_measures`) | easy: 2, hard: 1, medium: 0 |",
            "| `tests_collected` (`tests_defined`) | all: 2, no definitions read: 1 |",
            "| `filter_judge` (`filter_label`, `filter_reason`) | heuristic (ok): 2, no filter (-): 1 |",
            "| `filter_flags` | none: 2, image-only: 1, network-access: 1 |",
            "| `whole_suite` (`broken_outside_scope`) | breaks tests elsewhere: 1, not run: 1, nothing broken: 1 |",
        ] {
            assert!(out.contains(line), "{line}\n{out}");
        }
        let mut empty = String::new();
        quality(&mut empty, "test", &[]);
        assert!(empty.is_empty());
    }
}
