//! Sample rows of every table.

use std::collections::BTreeMap;

use kiln_schema::{
    Candidate, EnvironmentRecord, PlatformLabel, ReleaseInstance, TestStatus, ValidationRecord,
    Verdict,
};

pub fn candidate(id: &str) -> Candidate {
    Candidate {
        status: kiln_schema::CandidateStatus::Ok,
        error: None,
        repo: "owner/repo".into(),
        pull_number: Some(42),
        base_commit: "0123456789abcdef0123456789abcdef01234567".into(),
        patch: "diff --git a/x.py b/x.py\n+print('héllo ✓')\n".into(),
        test_patch: String::new(),
        problem_statement: "It breaks.\n\nWith \"quotes\" and a tab\t.".into(),
        hints_text: String::new(),
        created_at: "2024-05-01T12:00:00Z".into(),
        version: Some("1.2".into()),
        language: None,
        given_fail_to_pass: vec!["tests/test_x.py::test_a".into(), String::new()],
        given_pass_to_pass: vec![],
        origin: "tasks.jsonl:3".into(),
        ..Candidate::new(kiln_schema::InstanceId::new(id).unwrap())
    }
}

pub fn candidates(n: usize, prefix: &str) -> Vec<Candidate> {
    (0..n)
        .map(|i| candidate(&format!("{prefix}-{i}")))
        .collect()
}

pub fn verdict(id: &str) -> Verdict {
    Verdict {
        instance_id: kiln_schema::InstanceId::new(id).unwrap(),
        keep: false,
        label: "vague".into(),
        reason: "no clear expected behaviour".into(),
        judge: "gpt-x".into(),
        prompt_tokens: Some(1234),
        completion_tokens: None,
        cost_usd: Some(0.0012),
        flags: vec!["network-access".into()],
        votes: vec!["gpt-x: vague".into()],
        raw_answers: vec!["{\"label\": \"vague\"}".into()],
        answer_keys: vec!["0f".repeat(32)],
        fallback: None,
    }
}

pub fn platform_label(id: &str) -> PlatformLabel {
    PlatformLabel {
        instance_id: kiln_schema::InstanceId::new(id).unwrap(),
        platform: "linux".into(),
        evidence: vec!["os.fork".into()],
        labeller: "keyword".into(),
        keyword_evidence: "none".into(),
        reason: None,
        raw_answer: None,
        answer_keys: vec![],
        fallback: None,
        prompt_tokens: None,
        completion_tokens: None,
        cost_usd: None,
    }
}

pub fn environment(id: &str) -> EnvironmentRecord {
    let mut baseline = BTreeMap::new();
    baseline.insert("tests/test_x.py::test_a".to_string(), TestStatus::Pass);
    baseline.insert(
        "tests/test_x.py::test_b[1-2]".to_string(),
        TestStatus::Error,
    );
    EnvironmentRecord {
        instance_id: kiln_schema::InstanceId::new(id).unwrap(),
        repo: "owner/repo".into(),
        base_commit: "abc".into(),
        status: kiln_schema::EnvironmentStatus::Built,
        failure_class: None,
        failure_command: None,
        log_tail: Some("line 1\nline 2".into()),
        error_lines: vec!["src/x.c:1:1: error: boom".into()],
        language: "python".into(),
        project_version: Some("2.1".into()),
        license: "NOASSERTION".into(),
        plan: "python-pyproject".into(),
        base_image: "python:3.11-slim".into(),
        image: Some("kiln/owner-repo:abc".into()),
        image_digest: Some("sha256:0123abcd".into()),
        reused_from: Some("o__r-0".into()),
        reuse_check: Some("same".into()),
        environment_files: vec!["build/".into(), "src/pkg/_version.py".into()],
        setup_commands: vec!["pip install -e .".into(), "pip install pytest".into()],
        repairs: vec!["pkg-config: ran `apt-get install pkg-config` first".into()],
        environment: BTreeMap::from([("NODE_OPTIONS".into(), "--openssl-legacy-provider".into())]),
        rebuild_commands: vec![],
        test_command: "pytest -rA".into(),
        test_scope: "all".into(),
        tests_left_out: vec!["tests/test_net.py::test_download".into()],
        whole_test_command: Some("pytest".into()),
        collect_command: Some("pytest --collect-only -q".into()),
        parser: "pytest".into(),
        parser_script: None,
        dependency_cutoff: Some("2024-05-01T12:00:00Z".into()),
        version_reason: "requires-python >= 3.11".into(),
        baseline,
        baseline_passed: 1,
        baseline_failed: -1,
        setup_seconds: 12.25,
        test_seconds: 0.1,
        total_seconds: 1e-300,
        cpu_setup_seconds: 12.5,
        cpu_compile_seconds: -0.0,
        cpu_baseline_seconds: 1e300,
        dockerfile: None,
        dockerfile_check: Some("rebuilt and passed".into()),
        built_by: Some(kiln_schema::BuiltBy::Agent),
        agent_steps: 12,
        agent_tokens: 48_000,
        agent_cost_usd: 0.031,
        log_dir: format!("logs/{id}/launch"),
    }
}

pub fn validation(id: &str) -> ValidationRecord {
    let mut classes = BTreeMap::new();
    classes.insert("t::a".to_string(), "f2p".to_string());
    let mut flaky = BTreeMap::new();
    flaky.insert(
        "t::flaky".to_string(),
        BTreeMap::from([("before:1".to_string(), "pass".to_string())]),
    );
    let mut statuses = BTreeMap::new();
    statuses.insert("t::a".to_string(), TestStatus::Fail);
    statuses.insert("t::b".to_string(), TestStatus::Skip);
    ValidationRecord {
        instance_id: kiln_schema::InstanceId::new(id).unwrap(),
        status: kiln_schema::ValidationStatus::Validated,
        failure_class: None,
        reason: Some("ok".into()),
        FAIL_TO_PASS: vec!["t::a".into()],
        PASS_TO_PASS: vec!["t::b".into(), "t::c".into()],
        fail_to_pass_classes: classes,
        flaky,
        pass_to_fail: vec![],
        agreement: Some(kiln_schema::Relation::Superset),
        agreement_by_meaning: Some(kiln_schema::Relation::Exact),
        given_missing: vec![],
        given_extra: vec!["tests/test_x.py::test_extra".into()],
        pass_to_pass_agreement: Some(kiln_schema::Relation::Subset),
        log_parser: None,
        log_parser_reason: Some("the SWE-bench harness has no parser for kiln's `x` output".into()),
        harness_unread: Vec::new(),
        needs_network: vec!["tests/test_data.py::test_download".into()],
        repeats: 3,
        identical_runs_before: 3,
        identical_runs_after: 2,
        solution_leak: true,
        solution_leak_matches: vec!["print('héllo ✓')".into()],
        difficulty: None,
        difficulty_measures: BTreeMap::new(),
        tests_defined: 4,
        tests_collected: Some(0.75),
        whole_suite: Some("before: 3 passed; after: 3 passed".into()),
        broken_outside_scope: vec!["tests/test_other.py::test_x".into()],
        tests_not_collected: vec!["tests/test_data.py::test_download".into()],
        network: "none".into(),
        runs: BTreeMap::new(),
        run_statuses: BTreeMap::from([("before:1".to_string(), statuses)]),
        test_seconds: 3.5,
        total_seconds: f64::MAX,
        cpu_build_seconds: 3.25,
        cpu_test_seconds: f64::MIN_POSITIVE,
        log_dir: format!("logs/{id}/validate"),
    }
}

pub fn release(id: &str, repo: &str) -> ReleaseInstance {
    ReleaseInstance {
        instance_id: kiln_schema::InstanceId::new(id).unwrap(),
        repo: repo.into(),
        pull_number: Some("17".into()),
        base_commit: "abc".into(),
        patch: "p".into(),
        test_patch: "tp".into(),
        problem_statement: "ps".into(),
        hints_text: String::new(),
        created_at: "2024-05-01T12:00:00Z".into(),
        version: Some("1.4".into()),
        license: "MIT".into(),
        FAIL_TO_PASS: vec!["t::a".into()].into(),
        PASS_TO_PASS: vec![].into(),
        FAIL_TO_PASS_UNGRADED: kiln_schema::TestList::default(),
        PASS_TO_PASS_UNGRADED: kiln_schema::TestList::default(),
        image_digest: Some("sha256:0123abcd".into()),
        setup_commands: vec!["a".into()],
        parser: "pytest".into(),
        parser_script: Some("sed -n 's/^ok /[PASSED] /p'".into()),
        language: "python".into(),
        platform: "linux".into(),
        dockerfile: Some("FROM x".into()),
        launch_seconds: 1.0,
        validate_seconds: 2.0,
        repeats: 3,
        identical_runs_before: 3,
        identical_runs_after: 2,
        solution_leak: false,
        solution_leak_matches: Vec::new(),
        difficulty: Some(kiln_schema::Difficulty::Hard),
        difficulty_measures: BTreeMap::from([("lines".to_string(), 40)]),
        tests_defined: 4,
        tests_collected: Some(1.0),
        whole_suite: None,
        broken_outside_scope: Vec::new(),
        filter_judge: Some("gpt-x+gpt-y".into()),
        filter_label: Some("ok".into()),
        filter_reason: Some("clear".into()),
        filter_flags: vec!["network-access".into()],
        filter_fallback: Some("no usable answer".into()),
        run_id: "20240501-120000".into(),
        eval_script: "#!/bin/bash\nset -uxo pipefail\n".into(),
        log_parser: "parse_log_pytest_v2".into(),
        eval_type: "pass_and_fail".into(),
        environment_setup_commit: "abc".into(),
        image: "img".into(),
        rebuild_cmds: vec![],
        test_cmds: vec!["pytest".into()],
        issue_numbers: vec!["16".into()],
        commit_urls: vec!["https://github.com/o/r/commit/def".into()],
        harness_note: String::new(),
    }
}
