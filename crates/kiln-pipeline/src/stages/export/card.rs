//! The dataset card's body: what the release holds, how its rows were made, and its columns.

use std::fmt::Write as _;

use kiln_schema::{ReleaseInstance, Row as _};
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

/// The card's body below the split table.
pub(super) fn body(manifest: &ReleaseManifest, intro: &str, extra: &str) -> String {
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
    provenance(&mut out, manifest);
    out.push_str(extra.trim());
    out.push_str("\n\n");
    columns(&mut out);
    out
}
