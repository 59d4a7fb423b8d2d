//! Ingest of the task files kiln-testkit writes.

use kiln_github::{clone_url, read_task_file};
use kiln_testkit::{Expect, write_demo, write_tasks_with_errors};

#[test]
fn demo_task_file_is_ingested_with_given_lists() {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_demo(dir.path()).unwrap();
    let rows = read_task_file(&layout.tasks_file).unwrap();
    assert_eq!(rows.len(), layout.instances.len());
    for (n, (row, expected)) in rows.iter().zip(&layout.instances).enumerate() {
        assert_eq!(row.status.as_str(), "ok", "{:?}", row.error);
        assert_eq!(row.instance_id, expected.instance_id);
        assert_eq!(row.repo, expected.repo);
        assert_eq!(row.origin, format!("tasks.jsonl:{}", n + 1));
        assert_eq!(row.pull_number, Some(i64::try_from(n + 2).unwrap()));
        assert!(row.created_at.starts_with("2024-09-"));
        if let Expect::Validated {
            fail_to_pass,
            pass_to_pass,
        } = &expected.expect
        {
            assert_eq!(&row.given_fail_to_pass, fail_to_pass);
            assert_eq!(&row.given_pass_to_pass, pass_to_pass);
        }
        // The clone URL template of the layout reaches a real repository.
        let url = clone_url(&layout.clone_url_template(), &row.repo);
        assert!(std::path::Path::new(&url).join(".git").is_dir(), "{url}");
    }
}

#[test]
fn error_lines_become_error_rows() {
    let dir = tempfile::tempdir().unwrap();
    let layout = write_demo(dir.path()).unwrap();
    let file = write_tasks_with_errors(&layout).unwrap();
    let rows = read_task_file(&file.path).unwrap();
    let ok: Vec<_> = rows
        .iter()
        .filter(|r| r.status.as_str() == "ok")
        .map(|r| r.instance_id.clone())
        .collect();
    assert_eq!(ok, file.valid_instance_ids);
    let errors: Vec<_> = rows
        .iter()
        .filter(|r| r.status.as_str() == "error")
        .collect();
    assert_eq!(errors.len(), file.invalid_lines.len());
    for (row, line) in errors.iter().zip(&file.invalid_lines) {
        assert_eq!(row.instance_id, line.instance_id);
        assert_eq!(row.origin, format!("tasks-with-errors.jsonl:{}", line.line));
        let error = row.error.as_deref().unwrap();
        assert!(error.starts_with(&format!("tasks-with-errors.jsonl:{}: ", line.line)));
        match line.missing_field {
            Some(field) => assert!(
                error.ends_with(&format!("missing field `{field}`")),
                "{error}"
            ),
            None => assert!(error.contains("invalid JSON"), "{error}"),
        }
    }
}
