//! `[docker] registry`: launch pushes every environment to a registry (Debian's
//! `docker-registry` on loopback) and the rows name it there; on an engine that lost the
//! images, validation and evaluation pull them back by that name and run them by the digest
//! the row recorded.

use kiln_schema::{EnvironmentRecord, ReleaseInstance, ValidationRecord};

use crate::resume::{kiln_with_token, only_run, prepare, rows};
use crate::{Registry, kiln, run, tempdir, text};

/// Removes every name of the image `id` from the engine.
fn remove_image(id: &str) {
    let output = run(std::process::Command::new("docker").args(["rmi", "-f", id]));
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn environments_pushed_to_the_registry_are_pulled_back_to_validate_and_evaluate() {
    let tmp = tempdir();
    let registry = Registry::start(tmp.path());
    let dir = tmp.path().join("d");
    let dataset = "registry-e2e";
    let (demo, config) = prepare(&dir, dataset);
    let setting = format!("registry = \"{}/kiln\"\n", registry.address);
    let text_config = std::fs::read_to_string(&config).unwrap();
    let text_config = if text_config.contains("[docker]\n") {
        text_config.replacen("[docker]\n", &format!("[docker]\n{setting}"), 1)
    } else {
        text_config.replacen(
            "[dataset]\n",
            &format!("[docker]\n{setting}\n[dataset]\n"),
            1,
        )
    };
    std::fs::write(&config, text_config).unwrap();

    let first = run(kiln_with_token(&demo)
        .args(["run", "--config"])
        .arg(&config));
    assert!(first.status.success(), "{}", text(&first));
    let run_dir = only_run(&dir, dataset);
    let built: Vec<EnvironmentRecord> = rows::<EnvironmentRecord>(&run_dir.join("launch"))
        .into_iter()
        .filter(|r| r.image.is_some())
        .collect();
    assert!(built.len() >= 2, "{built:?}");
    let prefix = format!("{}/kiln/kiln-env/{dataset}-", registry.address);
    for row in &built {
        let image = row.image.clone().unwrap_or_default();
        assert!(image.starts_with(&prefix), "{image}");
        let (repository, tag) = image
            .trim_start_matches(&format!("{}/", registry.address))
            .rsplit_once(':')
            .unwrap_or_default();
        assert!(
            registry.tags(repository).iter().any(|t| t == tag),
            "{image} is not in the registry"
        );
    }
    let validated = |run_dir: &std::path::Path| -> Vec<(String, String, Vec<String>)> {
        let mut rows: Vec<_> = rows::<ValidationRecord>(&run_dir.join("validate"))
            .into_iter()
            .map(|v| {
                (
                    v.instance_id.to_string(),
                    v.status.to_string(),
                    v.FAIL_TO_PASS,
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let before = validated(&run_dir);

    // The engine loses every environment; validation pulls them back and decides the same.
    for row in &built {
        remove_image(row.image_digest.as_deref().unwrap_or_default());
    }
    let again = run(kiln_with_token(&demo)
        .args(["stage", "validate", "--force", "--config"])
        .arg(&config));
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(validated(&run_dir), before);
    for row in &built {
        let inspect = run(std::process::Command::new("docker").args([
            "image",
            "inspect",
            row.image_digest.as_deref().unwrap_or_default(),
        ]));
        assert!(
            inspect.status.success(),
            "{} was not pulled back",
            row.instance_id
        );
    }

    // Lost again: evaluation of the release's gold patches pulls them and resolves every row.
    let release = dir.join("datasets").join(dataset).join("releases");
    let release = std::fs::read_dir(&release)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.join("data").is_dir())
        .unwrap();
    let instances = kiln_pipeline::ops::evaluate::read_dataset(&release).unwrap();
    assert!(!instances.is_empty());
    let predictions = tmp.path().join("gold.jsonl");
    let lines: Vec<String> = instances
        .iter()
        .map(|i: &ReleaseInstance| {
            serde_json::json!({"instance_id": i.instance_id, "model_patch": i.patch}).to_string()
        })
        .collect();
    std::fs::write(&predictions, lines.join("\n")).unwrap();
    for instance in &instances {
        remove_image(instance.image_digest.as_deref().unwrap_or_default());
    }
    let evaluated = run(kiln()
        .args(["--json", "evaluate", "--dataset"])
        .arg(&release)
        .arg("--predictions")
        .arg(&predictions)
        .arg("--output")
        .arg(tmp.path().join("evaluation")));
    assert!(evaluated.status.success(), "{}", text(&evaluated));
    let report: serde_json::Value = serde_json::from_slice(&evaluated.stdout).unwrap();
    assert_eq!(
        report["summary"]["counts"]["resolved"].as_u64(),
        Some(instances.len() as u64),
        "{report:#}"
    );
}
