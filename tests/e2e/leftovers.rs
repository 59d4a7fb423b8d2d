//! What dead runs leave on the engine is removed by the next invocation of the dataset, whatever
//! run it chooses: containers of any of the dataset's runs, images whose tag moved on, scratch
//! images; what belongs to another dataset stays.

use std::path::Path;
use std::process::Command;

use crate::{containers_with_label, kiln, run, tempdir, text};

fn docker(args: &[&str]) -> String {
    let output = run(Command::new("docker").args(args));
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn image_exists(id: &str) -> bool {
    run(Command::new("docker").args(["image", "inspect", id]))
        .status
        .success()
}

/// An image with the dataset label `dataset` that no tag names: committed to `tag`, then the
/// tag moved to a second commit. Returns the untagged image's id.
fn untagged_image(dataset: &Path, tag: &str) -> String {
    let label = format!("kiln.dataset={}", dataset.display());
    let container = docker(&[
        "create",
        "--label",
        "kiln.managed=1",
        "--label",
        &label,
        "debian:bookworm",
        "true",
    ]);
    let old = docker(&["commit", &container, tag]);
    docker(&["commit", "-c", "ENV KILN_SECOND=1", &container, tag]);
    docker(&["rm", &container]);
    old
}

#[test]
fn a_new_run_removes_what_dead_runs_of_its_dataset_left() {
    let tmp = tempdir();
    let dataset = format!("hard-leftovers-{}", std::process::id());
    let root = tmp.path().join("datasets");
    let dataset_dir = root.join(&dataset);
    let other_dir = tmp.path().join("elsewhere").join(&dataset);
    // A task file with no usable task: the launch stage has nothing to do but is there, so
    // the engine is used.
    let tasks = tmp.path().join("tasks.jsonl");
    std::fs::write(&tasks, "{\"not\": \"a task\"}\n").unwrap();
    let config = tmp.path().join("pipeline.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\nname = \"{dataset}\"\nroot = {root:?}\n[sources.tasks]\nkind = \"ingest\"\n\
             path = {tasks:?}\n[stages.launch]\nkind = \"launch\"\ninputs = [\"tasks\"]\n"
        ),
    )
    .unwrap();

    // A container of an earlier run of the dataset, killed and never resumed.
    let container = docker(&[
        "run",
        "-d",
        "--init",
        "--label",
        "kiln.managed=1",
        "--label",
        &format!("kiln.dataset={}", dataset_dir.display()),
        "--label",
        &format!("kiln.run={dataset}/20200101-000000"),
        "debian:bookworm",
        "sleep",
        "600",
    ]);
    let repo = format!("kiln-e2e-leftovers/{}", std::process::id());
    let untagged = untagged_image(&dataset_dir, &format!("{repo}:env"));
    let scratch_tag = format!("{repo}:env.dockerfile-check");
    let helper = docker(&[
        "create",
        "--label",
        &format!("kiln.dataset={}", dataset_dir.display()),
        "debian:bookworm",
        "true",
    ]);
    docker(&[
        "commit",
        "-c",
        "LABEL kiln.scratch=1",
        &helper,
        &scratch_tag,
    ]);
    docker(&["rm", &helper]);
    // The same name under another root is another dataset.
    let foreign = untagged_image(&other_dir, &format!("{repo}:foreign"));

    let output = run(kiln().args(["run", "--new", "--config"]).arg(&config));
    let left_container = containers_with_label(&format!("kiln.run={dataset}/20200101-000000"));
    let (untagged_left, scratch_left, foreign_left, current_left) = (
        image_exists(&untagged),
        image_exists(&scratch_tag),
        image_exists(&foreign),
        image_exists(&format!("{repo}:env")),
    );
    // Clean up before asserting, so that a failure leaves nothing on the shared engine.
    let _ = run(Command::new("docker").args(["rm", "-f", &container]));
    for image in [
        untagged.as_str(),
        scratch_tag.as_str(),
        foreign.as_str(),
        &format!("{repo}:env"),
        &format!("{repo}:foreign"),
    ] {
        let _ = run(Command::new("docker").args(["rmi", "-f", image]));
    }
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        left_container.is_empty(),
        "containers left: {left_container:?}"
    );
    assert!(!untagged_left, "the untagged image of the dataset was left");
    assert!(!scratch_left, "the scratch image of the dataset was left");
    assert!(foreign_left, "another dataset's image was removed");
    assert!(current_left, "a tagged image of the dataset was removed");
}
