//! Integration tests of the ecosystem plans against the real Docker engine: each builds its
//! image (minutes on first use, then cached by tag) and launches a tiny dependency-free project
//! generated in a temporary git repository, asserting the plan, the parser and the baseline.
//! Tests that need the engine fail when it is missing: they never skip.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a panic is how a test fails"
)]
mod agent;
mod scripted;
mod support;

use kiln_schema::TestStatus;
use support::{engine, launch, run_in_image, status_of};

#[tokio::test]
async fn rust_crate_with_a_lockfile_builds_and_reports_each_test() {
    let record = launch(
        "rust",
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\nrust-version = \"1.70\"\n",
            ),
            (
                "Cargo.lock",
                "version = 3\n\n[[package]]\nname = \"demo\"\nversion = \"0.1.0\"\n",
            ),
            (
                "src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n    #[test]\n    fn fails() { assert_eq!(super::add(1, 2), 4); }\n}\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "rust-cargo");
    assert_eq!(record.parser, "cargo");
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
    assert!(
        record.version_reason.contains("Cargo.lock pins"),
        "{}",
        record.version_reason
    );
    assert_eq!(record.dependency_cutoff, None);
}

#[tokio::test]
async fn node_test_without_dependencies_installs_before_the_cutoff() {
    let record = launch(
        "node-test",
        &[
            (
                "package.json",
                r#"{"name":"demo","version":"1.0.0","scripts":{"test":"node --test"},"engines":{"node":">=18"}}"#,
            ),
            (
                "test/math.test.js",
                "const test = require('node:test');\nconst assert = require('node:assert');\ntest('adds', () => assert.strictEqual(1 + 2, 3));\ntest('fails', () => assert.strictEqual(1 + 2, 4));\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "node-npm-node-test");
    assert_eq!(record.parser, "node-test");
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
    assert!(
        record.base_image.starts_with("kiln/node:20-"),
        "{}",
        record.base_image
    );
    assert_eq!(
        record.dependency_cutoff.as_deref(),
        Some(support::COMMIT_DATE)
    );
}

#[tokio::test]
async fn jest_on_es_modules_runs_with_the_node_options_of_the_script() {
    // An ES-module package whose script runs Jest under `--experimental-vm-modules`: without
    // the option every suite fails with `Cannot use import statement outside a module`.
    let record = launch(
        "jest",
        &[
            (
                "package.json",
                r#"{"name":"demo","version":"1.0.0","type":"module","scripts":{"test":"cross-env NODE_OPTIONS=--experimental-vm-modules jest"},"devDependencies":{"jest":"^29.0.0"}}"#,
            ),
            ("sum.js", "export const sum = (a, b) => a + b;\n"),
            (
                "sum.test.js",
                "import { sum } from './sum.js';\n\ntest('adds', () => { expect(sum(1, 2)).toBe(3); });\ntest('fails', () => { expect(sum(1, 2)).toBe(4); });\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "node-npm-jest");
    assert_eq!(record.parser, "jest-json");
    assert!(
        record.test_command.contains("--experimental-vm-modules"),
        "{}",
        record.test_command
    );
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

#[tokio::test]
async fn go_module_builds_and_a_real_dependency_is_a_resolution_failure() {
    let record = launch(
        "go",
        &[
            ("go.mod", "module example.com/demo\n\ngo 1.21\n"),
            ("calc.go", "package demo\n\nfunc Add(a, b int) int { return a + b }\n"),
            (
                "calc_test.go",
                "package demo\n\nimport \"testing\"\n\nfunc TestAdds(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\nfunc TestFails(t *testing.T) {\n\tif Add(1, 2) != 4 {\n\t\tt.Fatal(\"expected\")\n\t}\n}\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "go-module");
    assert_eq!(record.parser, "go-test-json");
    assert!(
        record.base_image.starts_with("kiln/go:1.24-"),
        "{}",
        record.base_image
    );
    assert_eq!(status_of(&record, "TestAdds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "TestFails"), Some(TestStatus::Fail));

    // The Go module proxy is not reachable from every site; where it is, the download
    // succeeds and the build goes on, so only the failure's class is checked.
    let record = support::launch_any(
        "go-deps",
        &[
            (
                "go.mod",
                "module example.com/deps\n\ngo 1.21\n\nrequire github.com/kiln-nonexistent/nothing-here v0.0.1\n",
            ),
            ("main.go", "package deps\n"),
        ],
    )
    .await;
    assert_eq!(record.status.as_str(), "failed");
    assert_eq!(
        record.failure_class.map(kiln_schema::FailureClass::as_str),
        Some(kiln_schema::FailureClass::DependencyResolution.as_str()),
        "{:?}",
        record.log_tail
    );
    assert!(
        record
            .failure_command
            .as_deref()
            .is_some_and(|c| c.ends_with("go mod download")),
        "{:?}",
        record.failure_command
    );
}

#[tokio::test]
async fn cmake_project_runs_ctest() {
    let record = launch(
        "cmake",
        &[
            (
                "CMakeLists.txt",
                "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\nenable_testing()\nadd_executable(check check.c)\nadd_test(NAME adds COMMAND check 3)\nadd_test(NAME fails COMMAND check 4)\n",
            ),
            (
                "check.c",
                "#include <stdlib.h>\nint main(int argc, char **argv) { return argc > 1 && atoi(argv[1]) == 1 + 2 ? 0 : 1; }\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "cpp-cmake");
    assert_eq!(record.parser, "ctest");
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

/// A CI whose compiler matrix installs packages the suite lacks (another compiler's runtime,
/// a package Debian never had): the build files need none of them; the launch installs the
/// hinted packages the suite has, skips the one it lacks and names it in the row, and leaves
/// out the other compiler's runtime.
#[tokio::test]
async fn ci_packages_the_suite_lacks_are_skipped_and_named_not_a_failed_launch() {
    let record = launch(
        "cmake-hints",
        &[
            (
                "CMakeLists.txt",
                "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\nfind_package(Frobnicator QUIET)\nenable_testing()\nadd_executable(check check.c)\nadd_test(NAME zstd_header COMMAND check)\n",
            ),
            (
                "check.c",
                "#include <zstd.h>\nint main(void) { return ZSTD_VERSION_MAJOR >= 1 ? 0 : 1; }\n",
            ),
            (
                ".github/workflows/ci.yml",
                "jobs:\n  build:\n    steps:\n      - run: sudo apt-get install -y libzstd-dev libkiln-absent-dev libc++-8-dev\n",
            ),
        ],
    )
    .await;
    assert_eq!(
        record.status,
        kiln_schema::EnvironmentStatus::Built,
        "{:?} {:?}",
        record.failure_command,
        record.log_tail
    );
    assert_eq!(status_of(&record, "zstd_header"), Some(TestStatus::Pass));
    assert!(
        record.version_reason.contains(
            "hint packages not installed (not in the suite, or failing to install): libkiln-absent-dev"
        ),
        "{}",
        record.version_reason
    );
    assert!(
        record.version_reason.contains(
            "left out as another toolchain's runtime (the build uses the image's GCC): libc++-8-dev"
        ),
        "{}",
        record.version_reason
    );
}

/// A test target that adds `-Werror` itself (zstd's `test: MOREFLAGS += -Werror`): setup
/// builds, the test build stops on a warning made an error, and the test-phase rule demotes
/// that warning in CPPFLAGS, which the image carries; the tests then run.
#[tokio::test]
async fn a_test_build_that_adds_werror_gets_the_named_warning_demoted() {
    let record = launch(
        "make-werror",
        &[
            (
                "Makefile",
                "CFLAGS ?= -O2\nCFLAGS += -Wall $(MOREFLAGS)\n\nall: lib.o\n\nlib.o: lib.c\n\t$(CC) $(CPPFLAGS) $(CFLAGS) -c lib.c -o lib.o\n\ncheck: check.c\n\t$(CC) $(CPPFLAGS) $(CFLAGS) check.c -o check\n\ntest: MOREFLAGS += -Werror\ntest: check\n\t./check && echo 'PASS: adds' || echo 'FAIL: adds'\n",
            ),
            ("lib.c", "int add(int a, int b) { return a + b; }\n"),
            (
                "check.c",
                "int main(void) { int unused; return 1 + 2 == 3 ? 0 : 1; }\n",
            ),
        ],
    )
    .await;
    assert_eq!(
        record.status,
        kiln_schema::EnvironmentStatus::Built,
        "{:?} {:?}",
        record.failure_command,
        record.log_tail
    );
    assert_eq!(record.plan, "cpp-make");
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert!(
        record.repairs.len() == 1
            && record.repairs[0].starts_with("cpp-test-build-warnings-as-errors"),
        "{:?}",
        record.repairs
    );
    assert_eq!(
        record.environment.get("CPPFLAGS").map(String::as_str),
        Some("-Wno-error=unused-variable")
    );
}

/// C++ of an older era that bookworm's glibc no longer compiles (Catch2 2.x's failure:
/// `MINSIGSTKSZ` is a call to `sysconf` since glibc 2.34, so it cannot size a `constexpr`): the
/// launch starts over on Debian bullseye's GCC 10, builds and runs its tests there, and the row
/// says why.
#[tokio::test]
async fn cpp_that_fails_on_the_new_toolchain_starts_over_on_the_old_one() {
    let record = launch(
        "cpp-drift",
        &[
            (
                "CMakeLists.txt",
                "cmake_minimum_required(VERSION 3.13)\nproject(altstack CXX)\nenable_testing()\nadd_executable(stack_test stack_test.cpp)\nadd_test(NAME stack.size COMMAND stack_test size)\nadd_test(NAME stack.fails COMMAND stack_test fails)\n",
            ),
            (
                "stack_test.cpp",
                "#include <csignal>\n#include <cstddef>\n#include <string>\nstatic constexpr std::size_t kAltStack = MINSIGSTKSZ > 32768 ? MINSIGSTKSZ : 32768;\nint main(int argc, char **argv) {\n    std::string what = argc > 1 ? argv[1] : \"\";\n    if (what == \"size\") return kAltStack >= 32768 ? 0 : 1;\n    return 1;\n}\n",
            ),
        ],
    )
    .await;
    assert!(
        record.base_image.starts_with("kiln/cpp:bullseye-"),
        "{}",
        record.base_image
    );
    assert!(
        record
            .repairs
            .iter()
            .any(|r| r.starts_with("cpp-toolchain-drift")),
        "{:?}",
        record.repairs
    );
    assert!(
        record
            .version_reason
            .contains("started the launch over on Debian bullseye's toolchain"),
        "{}",
        record.version_reason
    );
    assert_eq!(status_of(&record, "stack.size"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "stack.fails"), Some(TestStatus::Fail));
}

#[tokio::test]
async fn maven_project_builds_offline_from_debians_repository() {
    let record = launch(
        "maven",
        &[
            (
                "pom.xml",
                "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n  <groupId>demo</groupId><artifactId>demo</artifactId><version>1.0</version>\n  <properties><maven.compiler.release>17</maven.compiler.release><project.build.sourceEncoding>UTF-8</project.build.sourceEncoding></properties>\n  <dependencies><dependency><groupId>junit</groupId><artifactId>junit</artifactId><version>4.13.2</version><scope>test</scope></dependency></dependencies>\n</project>\n",
            ),
            (
                "src/main/java/demo/Calc.java",
                "package demo;\npublic class Calc { public static int add(int a, int b) { return a + b; } }\n",
            ),
            (
                "src/test/java/demo/CalcTest.java",
                "package demo;\nimport org.junit.Test;\nimport static org.junit.Assert.assertEquals;\npublic class CalcTest {\n  @Test public void adds() { assertEquals(3, Calc.add(1, 2)); }\n  @Test public void fails() { assertEquals(4, Calc.add(1, 2)); }\n}\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "java-maven");
    assert_eq!(record.parser, "junit-xml");
    assert!(
        record.base_image.starts_with("kiln/java:17-"),
        "{}",
        record.base_image
    );
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

#[tokio::test]
async fn rust_crate_without_lockfile_resolves_as_of_the_commit_date() {
    // itoa 1.0.11 is the newest itoa published before the fixture's commit date (2024-06-01);
    // the test reads the lock that launch generated and moved back to that date.
    let record = launch(
        "rust-cutoff",
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n",
            ),
            (
                "src/lib.rs",
                "pub fn show(n: u32) -> String { itoa::Buffer::new().format(n).to_string() }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn itoa_is_locked_as_of_the_commit_date() {\n        let lock = std::fs::read_to_string(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/Cargo.lock\")).unwrap();\n        assert!(lock.contains(\"name = \\\"itoa\\\"\\nversion = \\\"1.0.11\\\"\"), \"{lock}\");\n    }\n    #[test]\n    fn fails() { assert_eq!(super::show(12), \"21\"); }\n}\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "rust-cargo");
    assert_eq!(
        status_of(&record, "itoa_is_locked_as_of_the_commit_date"),
        Some(TestStatus::Pass)
    );
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
    assert_eq!(
        record.dependency_cutoff.as_deref(),
        Some(support::COMMIT_DATE)
    );
}

#[tokio::test]
async fn python_project_that_excludes_3_11_runs_on_python_3_9() {
    let record = launch(
        "python39",
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.7,<3.10\"\n\n[tool.setuptools]\npy-modules = [\"demo\"]\n",
            ),
            ("demo.py", "def add(a, b):\n    return a + b\n"),
            (
                "test_demo.py",
                "import sys\n\nimport demo\n\n\ndef test_runs_on_3_9():\n    assert sys.version_info[:2] == (3, 9)\n\n\ndef test_fails():\n    assert demo.add(1, 2) == 4\n",
            ),
        ],
    )
    .await;
    assert_eq!(record.plan, "python-pyproject");
    assert!(
        record.base_image.starts_with("kiln/python:3.9-"),
        "{}",
        record.base_image
    );
    assert_eq!(
        status_of(&record, "test_runs_on_3_9"),
        Some(TestStatus::Pass)
    );
    assert_eq!(status_of(&record, "test_fails"), Some(TestStatus::Fail));
}

/// The project's CI starts Redis and PostgreSQL beside its test job (a GitHub Actions
/// `services:` block with the image's variables); the tests talk to both on loopback. They
/// are installed in the image, PostgreSQL gets the CI's user, password and database, and both
/// start before the baseline test run.
#[tokio::test]
async fn services_the_ci_starts_run_beside_the_tests() {
    // The database's address comes from the variable the workflow sets for every job.
    let workflow = "name: test\non: [push]\nenv:\n  DATABASE_URL: postgresql://app:secret@127.0.0.1/app_test\njobs:\n  test:\n    runs-on: ubuntu-latest\n    services:\n      redis:\n        image: redis:7\n        ports:\n          - 6379:6379\n      db:\n        image: postgres:15\n        env:\n          POSTGRES_USER: app\n          POSTGRES_PASSWORD: secret\n          POSTGRES_DB: app_test\n    steps:\n      - uses: actions/checkout@v4\n      - run: pip install -e . && pytest\n";
    let tests = "import os\nimport socket\nimport subprocess\n\n\ndef test_redis_answers_ping():\n    with socket.create_connection((\"127.0.0.1\", 6379), timeout=5) as conn:\n        conn.sendall(b\"PING\\r\\n\")\n        assert conn.recv(16) == b\"+PONG\\r\\n\"\n\n\ndef test_postgres_has_the_ci_database():\n    out = subprocess.run(\n        [\"psql\", os.environ[\"DATABASE_URL\"], \"-tAc\", \"select current_user\"],\n        capture_output=True,\n        text=True,\n    )\n    assert out.stdout.strip() == \"app\", out.stderr\n\n\ndef test_fails():\n    assert False\n";
    let record = launch(
        "services",
        &[
            (".github/workflows/test.yml", workflow),
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"svc\"\nversion = \"0.1.0\"\n\n[tool.setuptools]\npy-modules = [\"svc\"]\n",
            ),
            ("svc.py", "VERSION = 1\n"),
            ("tests/test_svc.py", tests),
        ],
    )
    .await;
    assert!(
        record
            .version_reason
            .contains("services the CI starts, run in the test container: redis, postgresql (user app, database app_test)"),
        "{}",
        record.version_reason
    );
    assert_eq!(
        status_of(&record, "test_redis_answers_ping"),
        Some(TestStatus::Pass),
        "{}",
        record.log_tail.as_deref().unwrap_or_default()
    );
    assert_eq!(
        status_of(&record, "test_postgres_has_the_ci_database"),
        Some(TestStatus::Pass)
    );
    assert_eq!(status_of(&record, "test_fails"), Some(TestStatus::Fail));
    assert!(
        record
            .test_command
            .starts_with("redis-server --daemonize yes")
    );
    assert!(
        record
            .version_reason
            .contains("variables the CI sets that the project reads: DATABASE_URL=postgresql://app:secret@127.0.0.1/app_test"),
        "{}",
        record.version_reason
    );
    // The servers came from Debian in the system layer of the launch's first steps, which
    // holds them and nothing of the checkout, for every cold launch that needs them.
    let runtime = engine().await;
    let base = runtime.image_id(&record.base_image).await.unwrap().unwrap();
    let apt = record
        .setup_commands
        .iter()
        .position(|c| c.contains("apt-get install") && c.contains("redis-server"))
        .unwrap_or_else(|| panic!("{:?}", record.setup_commands));
    let layer = kiln_launch::layer_tag(&base, &record.setup_commands[..=apt]);
    let inside = run_in_image(
        &runtime,
        &layer,
        "command -v redis-server psql && ls -A /testbed | wc -l",
    )
    .await;
    assert!(
        inside.contains("/redis-server") && inside.contains("/psql") && inside.ends_with("0\n"),
        "{layer}: {inside}"
    );
}

/// A failing test leaves a worker process (and another a non-daemon thread) running: the
/// interpreter would wait for them after pytest's summary until the run's timeout (rq's worker
/// pool tests, thirty minutes per run). The baseline ends with the session.
#[tokio::test]
async fn tests_that_hang_or_leave_processes_behind_do_not_hold_the_run() {
    // Were the run held (by the loop, or by what the others left running) until its timeout
    // (600 s), it would be killed and no test status read.
    let tests = "import multiprocessing\nimport threading\nimport time\n\n\ndef _sleep():\n    time.sleep(3600)\n\n\ndef test_leaves_a_process():\n    multiprocessing.Process(target=_sleep).start()\n    assert False, \"the pool was not reaped\"\n\n\ndef test_leaves_a_thread():\n    threading.Thread(target=_sleep).start()\n\n\ndef test_loops_forever():\n    while True:\n        pass\n\n\ndef test_after_the_loop():\n    pass\n";
    let record = launch(
        "leftovers",
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"leftovers\"\nversion = \"0.1.0\"\n\n[tool.setuptools]\npy-modules = [\"leftovers\"]\n",
            ),
            ("leftovers.py", "VERSION = 1\n"),
            ("tests/test_leftovers.py", tests),
        ],
    )
    .await;
    assert_eq!(
        status_of(&record, "test_leaves_a_thread"),
        Some(TestStatus::Pass)
    );
    assert_eq!(
        status_of(&record, "test_leaves_a_process"),
        Some(TestStatus::Fail)
    );
    // The case timeout (20 s in these launches) failed the loop and the session went on.
    assert_eq!(
        status_of(&record, "test_loops_forever"),
        Some(TestStatus::Fail)
    );
    assert_eq!(
        status_of(&record, "test_after_the_loop"),
        Some(TestStatus::Pass)
    );
    assert!(record.test_command.contains("-p kiln_exit"));
    assert!(record.test_command.contains("--kiln-case-timeout=20"));
}

#[tokio::test]
async fn django_layout_runs_runtests_on_the_labels_of_the_test_patch() {
    // Django's own layout (tests/runtests.py next to the django package) with a stand-in
    // runner: unittest at verbosity 2 prints what Django's runner prints. Only the module the
    // test patch touches runs.
    let runner = "import argparse, sys, unittest\nparser = argparse.ArgumentParser()\nparser.add_argument('labels', nargs='*')\nparser.add_argument('--verbosity')\nparser.add_argument('--parallel')\nlabels = parser.parse_args().labels\nsuite = unittest.defaultTestLoader.loadTestsFromNames(labels or ['other_tests.tests', 'forms_tests.tests'])\nresult = unittest.TextTestRunner(verbosity=2).run(suite)\nsys.exit(not result.wasSuccessful())\n";
    let record = support::launch_with_test_patch(
        "django",
        &[
            (
                "setup.py",
                "from setuptools import setup\nsetup(name='Django', version='3.0', packages=['django'], python_requires='>=3.6')\n",
            ),
            ("django/__init__.py", "VERSION = (3, 0)\n"),
            ("tests/runtests.py", runner),
            ("tests/requirements/py3.txt", "# optional\nsix\n"),
            ("tests/forms_tests/__init__.py", ""),
            (
                "tests/forms_tests/tests.py",
                "import unittest\n\nclass FormTests(unittest.TestCase):\n    def test_ok(self):\n        import six\n    def test_broken(self):\n        self.assertEqual(1, 2)\n",
            ),
            ("tests/other_tests/__init__.py", ""),
            (
                "tests/other_tests/tests.py",
                "import unittest\n\nclass OtherTests(unittest.TestCase):\n    def test_elsewhere(self):\n        pass\n",
            ),
        ],
        "diff --git a/tests/forms_tests/tests.py b/tests/forms_tests/tests.py\n--- a/tests/forms_tests/tests.py\n+++ b/tests/forms_tests/tests.py\n@@ -1 +1 @@\n-import unittest\n+import unittest  # changed\n",
    )
    .await;
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(record.plan, "python-django-runtests");
    assert_eq!(record.parser, "unittest");
    assert!(
        record
            .test_command
            .ends_with("runtests.py --verbosity 2 --parallel 1 forms_tests.tests 2>&1"),
        "{}",
        record.test_command
    );
    assert_eq!(
        record
            .baseline
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        [
            "forms_tests.tests.FormTests.test_broken",
            "forms_tests.tests.FormTests.test_ok"
        ]
    );
    assert_eq!(status_of(&record, "test_ok"), Some(TestStatus::Pass));
}

#[tokio::test]
async fn what_the_baseline_run_writes_does_not_reach_the_image() {
    // The test leaves files behind, as real suites do (a temporary file, a file in the
    // checkout, pytest's basetemp); validation starts every run from the image, which must
    // hold none of them.
    let (record, runtime, image) = support::launch_history(
        "leftovers",
        &[&[
            ("requirements.txt", "pytest\n"),
            (
                "test_state.py",
                "import os\n\n\ndef test_starts_clean(tmp_path):\n    assert not os.path.exists('/tmp/kiln-leftover')\n    open('/tmp/kiln-leftover', 'w').write('x')\n    open('written-by-test.txt', 'w').write('x')\n\n\ndef test_fails():\n    assert False\n",
            ),
        ]],
        &[],
        "",
        true,
    )
    .await;
    assert_eq!(record.status.as_str(), "built", "{:?}", record.log_tail);
    assert_eq!(
        status_of(&record, "test_starts_clean"),
        Some(TestStatus::Pass)
    );
    let out = support::run_in_image(
        &runtime,
        &image,
        "test ! -e /tmp/kiln-leftover && test ! -e written-by-test.txt && test -z \"$(ls /tmp | grep pytest-of)\" && echo clean",
    )
    .await;
    runtime.remove_image(&image).await.unwrap();
    assert_eq!(out.trim(), "clean");
}

#[tokio::test]
async fn repair_rules_fix_an_old_backend_unresolvable_lint_pins_and_an_undeclared_test_module() {
    // Three real failures in one project, each repaired once and recorded:
    // - setuptools 62 pinned as the build backend: no PEP 660, so `-e .` fails;
    // - the dev requirements pin a typing stub that does not exist on PyPI;
    // - the tests import `toolz`, which nothing declares.
    // The version comes from a git tag of an earlier commit (setuptools_scm), which the
    // checkout keeps: the test checks it.
    let pyproject = "[build-system]\nrequires = [\"setuptools~=62.0\", \"wheel\", \"setuptools_scm[toml]>=6.2,<8\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"repaired\"\ndynamic = [\"version\"]\nrequires-python = \">=3.8\"\n\n[tool.setuptools]\npy-modules = [\"repaired\"]\n\n[tool.setuptools_scm]\n";
    let (record, _, _) = support::launch_history(
        "repairs",
        &[
            &[("README.md", "first\n")],
            &[
                ("pyproject.toml", pyproject),
                ("repaired.py", "def value():\n    return 3\n"),
                (
                    "requirements-dev.txt",
                    "pytest\ntypes-kiln-does-not-exist==0.0.1\n",
                ),
                (
                    "test_repaired.py",
                    "from importlib.metadata import version\n\nimport toolz\n\nimport repaired\n\n\ndef test_version_from_the_tag():\n    assert version('repaired').startswith('1.4.'), version('repaired')\n\n\ndef test_value():\n    assert toolz.identity(repaired.value()) == 3\n\n\ndef test_fails():\n    assert repaired.value() == 4\n",
                ),
            ],
        ],
        &[(0, "v1.4.0")],
        "",
        false,
    )
    .await;
    assert_eq!(
        record.status.as_str(),
        "built",
        "{:?} {:?}\n{:?}\n{}",
        record.failure_class,
        record.failure_command,
        record.repairs,
        record.log_tail.as_deref().unwrap_or("")
    );
    eprintln!("repairs: {:#?}", record.repairs);
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        rules,
        [
            "python-editable-backend",
            "python-test-requirements",
            "python-missing-test-module"
        ],
        "{:#?}",
        record.repairs
    );
    assert_eq!(
        status_of(&record, "test_version_from_the_tag"),
        Some(TestStatus::Pass)
    );
    assert_eq!(status_of(&record, "test_value"), Some(TestStatus::Pass));
    // The Dockerfile replays the repaired commands, not the failed ones.
    let dockerfile = record.dockerfile.unwrap_or_default();
    // The dependencies install with isolation first, the project alone without.
    assert!(
        dockerfile.contains("-r pyproject.toml")
            && dockerfile.contains("--no-build-isolation --no-deps -e"),
        "{dockerfile}"
    );
    assert!(dockerfile.contains("toolz"), "{dockerfile}");
}

#[tokio::test]
async fn an_old_node_project_gets_its_node_and_a_failing_build_does_not_decide() {
    // `.nvmrc` asks for Node 16, which Debian does not package: the official build comes from
    // the npm registry. The entry point is a build output, so the plan builds first; the build
    // fails (as webpack 4 does on OpenSSL 3), the tests run from the sources anyway.
    let record = support::launch_any(
        "old-node",
        &[
            (
                "package.json",
                r#"{"name":"old","version":"1.0.0","main":"dist/index.js","scripts":{"build":"node build.js","test":"node test.js"}}"#,
            ),
            (".nvmrc", "16\n"),
            (
                "build.js",
                "console.error('Error: error:0308010C:digital envelope routines::unsupported');\nprocess.exit(1);\n",
            ),
            ("src/index.js", "exports.add = (a, b) => a + b;\n"),
            (
                "test.js",
                "const { add } = require('./src');\nconsole.log('TAP version 13');\nconsole.log('# node ' + process.version);\nconsole.log(add(1, 2) === 3 ? 'ok 1 - adds' : 'not ok 1 - adds');\nconsole.log('not ok 2 - fails');\nconsole.log('1..2');\nprocess.exit(1);\n",
            ),
        ],
    )
    .await;
    assert_eq!(
        record.status.as_str(),
        "built",
        "{:?} {:?}\n{:?}\n{}",
        record.failure_class,
        record.failure_command,
        record.repairs,
        record.log_tail.as_deref().unwrap_or("")
    );
    assert!(
        record.base_image.starts_with("kiln/node:16-"),
        "{}",
        record.base_image
    );
    assert!(
        record.version_reason.contains("official build 16.20.2"),
        "{}",
        record.version_reason
    );
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or(""))
        .collect();
    // The legacy-OpenSSL switch does not apply (Node 16 has OpenSSL 1.1 and refuses the
    // flag): the build is left out.
    assert_eq!(rules, ["optional-step"], "{:#?}", record.repairs);
    assert!(
        record.rebuild_commands.is_empty(),
        "{:?}",
        record.rebuild_commands
    );
    assert!(
        !record
            .setup_commands
            .iter()
            .any(|c| c.contains("run build")),
        "{:?}",
        record.setup_commands
    );
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

#[tokio::test]
async fn an_npm_cutoff_that_admits_no_version_is_dropped_and_recorded() {
    // semver 7.7.0 was published in 2025, after the commit (2024-06-01): `npm install
    // --before` finds nothing in `^7.7.0`, so the install is retried on the ranges as written.
    let record = launch(
        "npm-cutoff",
        &[
            (
                "package.json",
                r#"{"name":"cut","version":"1.0.0","scripts":{"test":"node --test"},"dependencies":{"semver":"^7.7.0"},"engines":{"node":">=18"}}"#,
            ),
            (
                "test/semver.test.js",
                "const test = require('node:test');\nconst assert = require('node:assert');\nconst semver = require('semver');\ntest('compares', () => assert.ok(semver.gt('1.2.3', '1.2.2')));\n",
            ),
        ],
    )
    .await;
    let rules: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        rules,
        ["node-cutoff-admits-nothing"],
        "{:#?}",
        record.repairs
    );
    assert_eq!(record.dependency_cutoff, None);
    assert!(
        record.setup_commands.iter().any(|c| c == "npm install"),
        "{:?}",
        record.setup_commands
    );
    assert_eq!(status_of(&record, "compares"), Some(TestStatus::Pass));
}

#[tokio::test]
async fn a_workspace_member_the_tests_do_not_use_does_not_break_the_build() {
    // `demo`'s build script fails (as one needing a native library the image lacks would);
    // the test patch touches `core`, so only `core` is built and tested.
    let test_patch = "diff --git a/core/tests/more.rs b/core/tests/more.rs\nnew file mode 100644\n--- /dev/null\n+++ b/core/tests/more.rs\n@@ -0,0 +1,2 @@\n+#[test]\n+fn more() { assert_eq!(app_core::add(2, 2), 4); }\n";
    let record = support::launch_with_test_patch(
        "rust-workspace",
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"core\", \"demo\"]\nresolver = \"2\"\n",
            ),
            (
                "Cargo.lock",
                "version = 3\n\n[[package]]\nname = \"app-core\"\nversion = \"0.1.0\"\n\n[[package]]\nname = \"demo\"\nversion = \"0.1.0\"\n",
            ),
            (
                "core/Cargo.toml",
                "[package]\nname = \"app-core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            (
                "core/src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n    #[test]\n    fn fails() { assert_eq!(super::add(1, 2), 4); }\n}\n",
            ),
            (
                "demo/Cargo.toml",
                "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\nbuild = \"build.rs\"\n",
            ),
            (
                "demo/build.rs",
                "fn main() { panic!(\"could not find system library 'freetype2'\"); }\n",
            ),
            ("demo/src/main.rs", "fn main() {}\n"),
        ],
        test_patch,
    )
    .await;
    assert_eq!(
        record.status.as_str(),
        "built",
        "{:?} {:?}\n{}",
        record.failure_class,
        record.failure_command,
        record.log_tail.as_deref().unwrap_or("")
    );
    assert_eq!(
        record.test_command,
        "cargo test -p app-core --no-fail-fast 2>&1"
    );
    assert_eq!(
        record.test_scope,
        "touched: packages app-core (1 of 2 in the workspace)"
    );
    assert_eq!(status_of(&record, "adds"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

/// The test patch touches `app-core`, so kiln first compiles its tests alone. One refuses to
/// compile without a feature (`compile_error!`, as tokio's do without `--features full`): the
/// feature the error names is added for its package. Another uses an API of `helper` that only
/// another member turns on (features unify across the workspace), so the tests do not compile
/// alone: the whole workspace is compiled and tested, the feature kept, and the row says why
/// its scope is the workspace.
#[tokio::test]
async fn narrowed_rust_tests_get_the_features_they_ask_for_then_the_workspace() {
    let test_patch = "diff --git a/core/tests/more.rs b/core/tests/more.rs\nnew file mode 100644\n--- /dev/null\n+++ b/core/tests/more.rs\n@@ -0,0 +1,2 @@\n+#[test]\n+fn more() { assert_eq!(app_core::add(2, 2), 4); }\n";
    let record = support::launch_with_test_patch(
        "rust-features",
        &[
            (
                "Cargo.toml",
                "[workspace]\nmembers = [\"app\", \"core\", \"helper\"]\nresolver = \"2\"\n",
            ),
            (
                "Cargo.lock",
                "version = 3\n\n[[package]]\nname = \"app\"\nversion = \"0.1.0\"\ndependencies = [\n \"helper\",\n]\n\n[[package]]\nname = \"app-core\"\nversion = \"0.1.0\"\ndependencies = [\n \"helper\",\n]\n\n[[package]]\nname = \"helper\"\nversion = \"0.1.0\"\n",
            ),
            (
                "core/Cargo.toml",
                "[package]\nname = \"app-core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\nfull = []\n\n[dev-dependencies]\nhelper = { path = \"../helper\" }\n",
            ),
            (
                "core/src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
            ),
            (
                "core/tests/require_full.rs",
                "#![cfg(not(feature = \"full\"))]\ncompile_error!(\"run the app-core tests with `--features full`\");\n",
            ),
            (
                "core/tests/uses_extra.rs",
                "#[test]\nfn extra_is_two() { assert_eq!(helper::extra(), 2); }\n#[test]\nfn fails() { assert_eq!(app_core::add(1, 2), 4); }\n",
            ),
            (
                "helper/Cargo.toml",
                "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\nextra = []\n",
            ),
            (
                "helper/src/lib.rs",
                "pub fn base() -> i32 { 1 }\n#[cfg(feature = \"extra\")]\npub fn extra() -> i32 { 2 }\n",
            ),
            (
                "app/Cargo.toml",
                "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nhelper = { path = \"../helper\", features = [\"extra\"] }\n",
            ),
            ("app/src/lib.rs", "pub fn app() -> i32 { helper::extra() }\n"),
        ],
        test_patch,
    )
    .await;
    assert_eq!(
        record.status.as_str(),
        "built",
        "{:?} {:?}\n{}\n{:#?}",
        record.failure_class,
        record.failure_command,
        record.log_tail.as_deref().unwrap_or(""),
        record.repairs
    );
    // Which error cargo prints first depends on the order its jobs finish; either way both
    // rules apply once and end at the same commands.
    let mut repairs: Vec<&str> = record
        .repairs
        .iter()
        .map(|r| r.split(':').next().unwrap_or_default())
        .collect();
    repairs.sort_unstable();
    assert_eq!(
        repairs,
        [
            "rust-features-asked-by-compile-error",
            "rust-narrowed-tests-do-not-compile"
        ],
        "{:#?}",
        record.repairs
    );
    assert_eq!(
        record.test_command,
        "cargo test --workspace --no-fail-fast --features app-core/full 2>&1"
    );
    assert_eq!(
        record.rebuild_commands,
        ["cargo test --workspace --no-run --features app-core/full"]
    );
    assert!(
        record
            .test_scope
            .starts_with("all (the touched packages app-core did not compile alone: error"),
        "{}",
        record.test_scope
    );
    assert_eq!(status_of(&record, "extra_is_two"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "fails"), Some(TestStatus::Fail));
}

#[tokio::test]
async fn an_unfetched_submodule_gets_the_system_library_and_a_stub_makefile() {
    // `deps/zlib` is a submodule that could not be fetched; the top Makefile recurses into
    // it, which stopped make at `No rule to make target 'all'`. Debian's zlib stands in.
    let record = launch(
        "submodule",
        &[
            (
                ".gitmodules",
                "[submodule \"deps/zlib\"]\n\tpath = deps/zlib\n\turl = https://github.com/madler/zlib\n",
            ),
            (
                "configure.ac",
                "AC_INIT([sub], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_CHECK_LIB([z], [compress])\nAC_CONFIG_FILES([Makefile src/Makefile])\nAC_OUTPUT\n",
            ),
            ("Makefile.am", "SUBDIRS = deps/zlib src\n"),
            (
                "src/Makefile.am",
                "check_PROGRAMS = t_bound t_fails\nTESTS = t_bound t_fails\nt_bound_SOURCES = t_bound.c\nt_fails_SOURCES = t_fails.c\n",
            ),
            (
                "src/t_bound.c",
                "#include <zlib.h>\nint main(void) { return compressBound(100) >= 100 ? 0 : 1; }\n",
            ),
            ("src/t_fails.c", "int main(void) { return 1; }\n"),
        ],
    )
    .await;
    assert_eq!(record.plan, "cpp-autotools");
    assert!(
        record
            .version_reason
            .contains("deps/zlib: Debian zlib1g-dev, a stub Makefile in the empty directory"),
        "{}",
        record.version_reason
    );
    assert_eq!(status_of(&record, "t_bound"), Some(TestStatus::Pass));
    assert_eq!(status_of(&record, "t_fails"), Some(TestStatus::Fail));
}

/// The shape of a held-out failure: the library links a libtool archive of the bundled copy
/// (a submodule that could not be fetched) unless configure is given the switch to the
/// system's, and the archive has no rule (`No rule to make target
/// 'modules/zlib/src/libz.la'`). The switch comes from `configure.ac`, and the Makefiles
/// configure wrote show that it took.
#[tokio::test]
async fn an_unfetched_submodule_is_switched_to_the_system_library() {
    let configure_ac = |switch: &str| {
        format!(
            "AC_INIT([sub], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nLT_INIT\n{switch}AM_CONDITIONAL([SYSTEM_ZLIB], [test \"x$with_system_zlib\" = xyes])\nAC_CHECK_LIB([z], [compress])\nAC_CONFIG_FILES([Makefile src/Makefile])\nAC_OUTPUT\n"
        )
    };
    let with_switch = configure_ac(
        "AC_ARG_WITH([system-zlib], [AS_HELP_STRING([--with-system-zlib], [use the system zlib])], [], [with_system_zlib=no])\n",
    );
    let files = |configure_ac: &str| -> Vec<(String, String)> {
        [
            (
                ".gitmodules",
                "[submodule \"modules/zlib\"]\n\tpath = modules/zlib\n\turl = https://github.com/madler/zlib\n",
            ),
            ("configure.ac", configure_ac),
            ("Makefile.am", "SUBDIRS = src\n"),
            (
                "src/Makefile.am",
                "check_PROGRAMS = t_bound\nTESTS = t_bound\nt_bound_SOURCES = t_bound.c\nif SYSTEM_ZLIB\nt_bound_LDADD = -lz\nelse\nt_bound_LDADD = $(top_builddir)/modules/zlib/src/libz.la\nendif\n",
            ),
            (
                "src/t_bound.c",
                "#include <zlib.h>\nint main(void) { return compressBound(100) >= 100 ? 0 : 1; }\n",
            ),
        ]
        .iter()
        .map(|(a, b)| ((*a).to_string(), (*b).to_string()))
        .collect()
    };
    fn borrowed(files: &[(String, String)]) -> Vec<(&str, &str)> {
        files
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect()
    }
    let switched = files(&with_switch);
    let record = launch("submodule-switch", &borrowed(&switched)).await;
    assert_eq!(record.plan, "cpp-autotools");
    assert!(
        record
            .version_reason
            .contains("modules/zlib: Debian zlib1g-dev, configured with --with-system-zlib"),
        "{}",
        record.version_reason
    );
    assert_eq!(status_of(&record, "t_bound"), Some(TestStatus::Pass));
    // Without a switch to offer, the build stops after configure, saying why, not at make's
    // `No rule to make target`.
    let unswitched = files(&configure_ac(""));
    let record = support::launch_any("submodule-no-switch", &borrowed(&unswitched)).await;
    assert_eq!(record.status.as_str(), "failed");
    let tail = record.log_tail.as_deref().unwrap_or_default();
    assert!(
        tail.contains("kiln: the build still links the bundled copy in modules/zlib (a git submodule that could not be fetched): configure offers no switch to the system copy that kiln knows"),
        "{tail}"
    );
    assert!(!tail.contains("No rule to make target"), "{tail}");
}

#[tokio::test]
async fn a_missing_debian_base_image_is_made_with_debootstrap() {
    // Under a tag of its own, so the engine's debian:bookworm (made by the scripts) stays.
    let runtime = support::engine().await;
    let tag = format!("kiln-it/debian:bookworm-{}", std::process::id());
    let mut log = Vec::new();
    let mut sink = |bytes: &[u8]| log.extend_from_slice(bytes);
    let made = kiln_launch::debian::ensure_as(runtime.as_ref(), "debian:bookworm", &tag, &mut sink)
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&log).into_owned();
    assert_eq!(made, kiln_launch::debian::Made::Bootstrapped, "{log}");
    assert!(log.contains("making it with debootstrap"), "{log}");
    let out = support::run_in_image(&runtime, &tag, "cat /etc/debian_version; echo $LANG").await;
    runtime.remove_image(&tag).await.unwrap();
    assert!(out.starts_with("12."), "{out}");
    assert!(out.contains("C.UTF-8"), "{out}");
}

/// A record whose id, repository, commit and test command hold line breaks (as a hostile task
/// file once put in a row) and whose setup commands span lines: the synthesised Dockerfile,
/// built by the engine, runs exactly the setup commands and nothing else.
#[tokio::test]
async fn a_hostile_record_adds_no_instruction_to_its_dockerfile() {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use kiln_core::{ContainerRuntime, ContainerSpec, ExecSpec, ImageBuild};

    let runtime: Arc<dyn ContainerRuntime> = match kiln_docker::DockerRuntime::connect().await {
        Ok(runtime) => Arc::new(runtime),
        Err(e) => panic!("this test needs a Docker engine (scripts/docker-engine.sh start): {e}"),
    };
    let record = kiln_schema::EnvironmentRecord {
        repo: "o/r\rRUN touch /injected-repo".into(),
        base_commit: "0123abc\nRUN touch /injected-commit".into(),
        base_image: "debian:bookworm".into(),
        test_command: "true\nRUN touch /injected-test".into(),
        setup_commands: vec![
            "echo one > /one".into(),
            "printf 'a\\n' > /a\necho b > /b".into(),
            "cat > /c <<EOF\nhello\nEOF".into(),
            "echo d \\".into(),
        ],
        // An instance id cannot hold a line break at all (`InstanceId`); the other values are
        // the record's own text.
        ..kiln_schema::EnvironmentRecord::new(kiln_schema::InstanceId::new("x__y-1").unwrap())
    };
    let dockerfile = kiln_launch::dockerfile::dockerfile(&record);
    let mut context = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o644);
    header.set_cksum();
    context
        .append_data(&mut header, "testbed/x.txt", &b"hi\n"[..])
        .unwrap();
    let tag = format!("kiln-it/dockerfile-injection:{}", std::process::id());
    let labels = BTreeMap::from([(
        kiln_core::runtime::LABEL_RUN.to_string(),
        format!("it-{}-dockerfile", std::process::id()),
    )]);
    let build = ImageBuild {
        tag: tag.clone(),
        dockerfile: dockerfile.clone(),
        context_archive: context.into_inner().unwrap(),
        labels: labels.clone(),
        ..ImageBuild::default()
    };
    let built = runtime.build_image(&build, &mut |_: &[u8]| {}).await;
    let checked = async {
        built?;
        let id = runtime
            .create(&ContainerSpec {
                image: tag.clone(),
                labels: labels.clone(),
                max_lifetime: Duration::from_secs(120),
                ..ContainerSpec::default()
            })
            .await?;
        let outcome = runtime
            .exec(
                &id,
                &ExecSpec::new(
                    "ls -d /injected* 2>/dev/null; cat /one /a /b /c; test -e /testbed/x.txt && echo context",
                    Duration::from_secs(30),
                ),
                &mut |_: &[u8]| {},
            )
            .await;
        let _ = runtime.remove(&id).await;
        outcome
    }
    .await;
    let _ = runtime.remove_image(&tag).await;
    let outcome = checked.unwrap_or_else(|e| panic!("failed to {e}\n{dockerfile}"));
    assert_eq!(
        outcome.output, "one\na\nb\nhello\ncontext\n",
        "{dockerfile}"
    );
}

/// A registry outage as launch's containers see it (every container cut off from the network,
/// on the real engine): the install fails to fetch, the registry check in the same container
/// finds PyPI silent, and the launch ends with an error naming the registry, not a row. The
/// same project builds on the working network (the plan's other tests show that).
#[tokio::test]
async fn a_dependency_install_without_a_network_blames_the_registry_not_the_repository() {
    let runtime = support::Offline(support::engine().await);
    let result = support::launch_on(
        std::sync::Arc::new(runtime),
        "offline",
        &[
            (
                "pyproject.toml",
                "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = [\"attrs\"]\n\n[tool.setuptools]\npy-modules = [\"demo\"]\n",
            ),
            ("demo.py", "import attrs\n"),
            (
                "tests/test_demo.py",
                "import demo\n\ndef test_adds():\n    assert 1 + 2 == 3\n\ndef test_fails():\n    assert 1 + 2 == 4\n",
            ),
        ],
    )
    .await;
    match result {
        Err(kiln_launch::LaunchError::RegistryDown { url, error }) => {
            assert_eq!(url, "https://pypi.org/simple/");
            assert!(!error.is_empty());
        }
        other => panic!("expected the registry to be blamed: {other:?}"),
    }
}

/// Three commits of one repository with reuse on the real engine: each later commit starts from
/// the nearest ancestor's environment and gets the baseline a cold launch gets (`added` are the
/// tests commits 1 and 2 add, which must pass); a commit never starts from a later commit's
/// environment, so the file commit 2's build writes at `planted` (absolute path) never reaches
/// an earlier instance. Returns the seconds of commit 0 cold, 1 and 2 reused, and 2 cold.
async fn check_reuse(
    name: &str,
    commits: [&[(&str, &str)]; 3],
    added: [&str; 2],
    planted: &str,
    afresh: bool,
) -> [f64; 4] {
    let (_tmp, repo, shas) = support::history(&commits, &[]);
    let runtime = support::engine().await;
    let mut images = Vec::new();
    let mut launch =
        async |commit: usize, instance: u32, reuse: Option<Vec<kiln_launch::ReuseSource>>| {
            let started = std::time::Instant::now();
            let (record, tag) =
                support::launch_kept(&runtime, name, &repo, &shas[commit], instance, reuse).await;
            assert_eq!(record.status.as_str(), "built", "{record:?}");
            images.push(tag);
            (record, started.elapsed().as_secs_f64())
        };
    let source = |record: &kiln_schema::EnvironmentRecord, commit: usize| {
        support::reuse_source(record, &shas[commit])
    };

    let (first, cold_first) = launch(0, 1, None).await;
    let (second, reused_second) = launch(1, 2, Some(vec![source(&first, 0)])).await;
    assert_eq!(
        second.reused_from.as_deref(),
        Some(format!("kiln-it__{name}-1").as_str())
    );
    assert_eq!(status_of(&second, added[0]), Some(TestStatus::Pass));
    // Commit 1 changed no manifest: the dependency steps commit 0 ran are not run again.
    assert!(
        second
            .version_reason
            .contains("setup step(s) not run again (kiln-it__"),
        "{}",
        second.version_reason
    );
    assert_eq!(second.setup_commands, first.setup_commands);
    // Its checkout came by git from commit 0's: at commit 1, nothing of commit 2, no
    // change to a tracked file, a sound object store.
    let git = support::run_in_image(
        &runtime,
        second.image_digest.as_deref().unwrap(),
        &format!(
            "cd /testbed && git rev-parse HEAD && git status --porcelain --untracked-files=no \
             && git fsck --no-dangling 2>&1 && git cat-file -e {} 2>/dev/null || echo 'not in the history'",
            shas[2]
        ),
    )
    .await;
    assert_eq!(git.trim(), format!("{}\nnot in the history", shas[1]));
    // What an install leaves that a cold launch lacks: a package in the venv, a lockfile the
    // repository does not track.
    let leftovers_tag = format!("kiln-it/launch:{name}-leftovers-{}", std::process::id());
    let mut second_source = source(&second, 1);
    second_source.image = support::commit_in_image(
        &runtime,
        second.image_digest.as_deref().unwrap(),
        "mkdir -p /opt/kiln/venv && touch /opt/kiln/venv/left-by-the-source \
         && echo 'version = 1' > /testbed/uv.lock",
        &leftovers_tag,
    )
    .await;
    let (third, reused_third) = launch(2, 3, Some(vec![source(&first, 0), second_source])).await;
    assert_eq!(
        third.reused_from.as_deref(),
        Some(format!("kiln-it__{name}-2").as_str()),
        "the nearest ancestor"
    );
    // With a dependency manifest changed, the installs start from nothing the source's left,
    // as a cold launch's do; with none changed, the source's installs stand.
    assert_eq!(
        third
            .version_reason
            .contains("dependencies installed afresh"),
        afresh,
        "{}",
        third.version_reason
    );
    let left = support::run_in_image(
        &runtime,
        third.image_digest.as_deref().unwrap(),
        "ls /opt/kiln/venv/left-by-the-source /testbed/uv.lock 2>/dev/null | wc -l",
    )
    .await;
    assert_eq!(left.trim(), if afresh { "0" } else { "2" });
    let (cold_third, cold_third_seconds) = launch(2, 4, None).await;
    assert_eq!(cold_third.reused_from, None);
    assert_eq!(
        third.baseline, cold_third.baseline,
        "reuse changed the baseline"
    );
    assert_eq!(status_of(&third, added[1]), Some(TestStatus::Pass));

    // Commit 1 offered only commit 2's environment (a later one): launched cold, and nothing
    // commit 2's build planted is in its image.
    let (earlier, _) = launch(1, 5, Some(vec![source(&third, 2)])).await;
    assert_eq!(earlier.reused_from, None);
    let planted = format!("test -e {planted} && echo planted || echo absent");
    let in_third =
        support::run_in_image(&runtime, third.image_digest.as_deref().unwrap(), &planted).await;
    assert_eq!(
        in_third.trim(),
        "planted",
        "the later build plants the file"
    );
    let in_earlier =
        support::run_in_image(&runtime, earlier.image_digest.as_deref().unwrap(), &planted).await;
    assert_eq!(in_earlier.trim(), "absent");
    for tag in images.into_iter().chain([leftovers_tag]) {
        let _ = runtime.remove_image(&tag).await;
    }
    [cold_first, reused_second, reused_third, cold_third_seconds]
}

/// Reuse on three commits of a Rust crate (its `target/` warm); commit 2's build script plants
/// a file in `target/`.
#[tokio::test]
async fn reuse_starts_from_the_nearest_ancestor_and_matches_a_cold_launch() {
    let lib = |tests: &str| {
        format!(
            "pub fn add(a: i32, b: i32) -> i32 {{ a + b }}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn adds() {{ assert_eq!(super::add(1, 2), 3); }}\n    #[test]\n    fn fails() {{ assert_eq!(super::add(1, 2), 4); }}\n{tests}}}\n"
        )
    };
    let manifest = "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
    let lib0 = lib("");
    let lib1 = lib("    #[test]\n    fn adds_zero() { assert_eq!(super::add(0, 2), 2); }\n");
    let lib2 = lib(
        "    #[test]\n    fn adds_zero() { assert_eq!(super::add(0, 2), 2); }\n    #[test]\n    fn adds_negative() { assert_eq!(super::add(-1, 2), 1); }\n",
    );
    let plant = "fn main() {\n    let target = std::path::Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"target\");\n    let _ = std::fs::write(target.join(\"planted-by-commit-2\"), \"later\");\n}\n";
    let [cold, second, third, cold_third] = check_reuse(
        "reuse",
        [
            &[("Cargo.toml", manifest), ("src/lib.rs", &lib0)],
            &[("src/lib.rs", &lib1)],
            &[("src/lib.rs", &lib2), ("build.rs", plant)],
        ],
        ["adds_zero", "adds_negative"],
        "/testbed/target/planted-by-commit-2",
        false,
    )
    .await;
    eprintln!(
        "[reuse] commit 0 cold {cold:.0}s; commit 1 reused {second:.0}s; commit 2 reused {third:.0}s, cold {cold_third:.0}s"
    );
}

/// Reuse on three commits of a Python package installed editable into its venv (the venv and
/// uv's cache warm); commit 2's `setup.py` writes a file into the checkout while it is built.
#[tokio::test]
async fn python_reuse_starts_from_the_nearest_ancestor_and_matches_a_cold_launch() {
    let pyproject = "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"demo\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\n";
    let tests = |more: &str| {
        format!(
            "from demo import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n\ndef test_fails():\n    assert add(1, 2) == 4\n{more}"
        )
    };
    let tests0 = tests("");
    let tests1 = tests("\ndef test_adds_zero():\n    assert add(0, 2) == 2\n");
    let tests2 = tests(
        "\ndef test_adds_zero():\n    assert add(0, 2) == 2\n\ndef test_adds_negative():\n    assert add(-1, 2) == 1\n",
    );
    let setup = "import pathlib\nfrom setuptools import setup\npathlib.Path(__file__).with_name(\"planted-by-commit-2\").write_text(\"later\")\nsetup()\n";
    let [cold, second, third, cold_third] = check_reuse(
        "pyreuse",
        [
            &[
                ("pyproject.toml", pyproject),
                ("src/demo/__init__.py", "def add(a, b):\n    return a + b\n"),
                ("tests/test_demo.py", &tests0),
            ],
            &[("tests/test_demo.py", &tests1)],
            &[("tests/test_demo.py", &tests2), ("setup.py", setup)],
        ],
        [
            "tests/test_demo.py::test_adds_zero",
            "tests/test_demo.py::test_adds_negative",
        ],
        "/testbed/planted-by-commit-2",
        true,
    )
    .await;
    eprintln!(
        "[pyreuse] commit 0 cold {cold:.0}s; commit 1 reused {second:.0}s; commit 2 reused {third:.0}s, cold {cold_third:.0}s"
    );
}

/// A reused CMake build directory is configured again as a cold one is: commit 1 turns an
/// option's default on, which the source's cached `OFF` would otherwise keep.
#[tokio::test]
async fn a_reused_cmake_build_takes_the_new_default_of_an_option() {
    let cmake = |default: &str| {
        format!(
            "cmake_minimum_required(VERSION 3.16)\nproject(demo C)\noption(DEMO_WIDE \"wide\" {default})\nenable_testing()\nadd_executable(check check.c)\nif(DEMO_WIDE)\n  target_compile_definitions(check PRIVATE WIDE=1)\nendif()\nadd_test(NAME adds COMMAND check 3)\nadd_test(NAME wide COMMAND check wide)\n"
        )
    };
    let check = "#include <stdlib.h>\n#include <string.h>\nint main(int argc, char **argv) {\n  if (argc > 1 && strcmp(argv[1], \"wide\") == 0) {\n#ifdef WIDE\n    return 0;\n#else\n    return 1;\n#endif\n  }\n  return argc > 1 && atoi(argv[1]) == 1 + 2 ? 0 : 1;\n}\n";
    let (off, on) = (cmake("OFF"), cmake("ON"));
    let (_tmp, repo, shas) = support::history(
        &[
            &[("CMakeLists.txt", &off), ("check.c", check)],
            &[("CMakeLists.txt", &on)],
        ],
        &[],
    );
    let runtime = support::engine().await;
    let (first, first_tag) =
        support::launch_kept(&runtime, "cmake-reuse", &repo, &shas[0], 1, None).await;
    assert_eq!(status_of(&first, "wide"), Some(TestStatus::Fail));
    let source = support::reuse_source(&first, &shas[0]);
    let (reused, reused_tag) = support::launch_kept(
        &runtime,
        "cmake-reuse",
        &repo,
        &shas[1],
        2,
        Some(vec![source]),
    )
    .await;
    assert_eq!(
        reused.reused_from.as_deref(),
        Some("kiln-it__cmake-reuse-1")
    );
    assert!(
        reused
            .version_reason
            .contains("dependencies installed afresh"),
        "{}",
        reused.version_reason
    );
    assert_eq!(status_of(&reused, "wide"), Some(TestStatus::Pass));
    for tag in [first_tag, reused_tag] {
        let _ = runtime.remove_image(&tag).await;
    }
}
