//! The scripts of `swebench::id_script` print, for every captured log of their formats in
//! `tests/data/`, exactly the ids and verdicts kiln's own parser reads (as the SWE-bench
//! harness's `parse_log_jest_json` reads the lines back), on the host's node and awk (Debian's
//! mawk, as in the images) and on gawk and busybox awk where they are installed.

use std::path::Path;
use std::process::{Command, Stdio};

use kiln_testlog::swebench::{harness_parse, harness_parsers, id_script};

use crate::check::{other_awks, run_script};

/// kiln's verdicts of `log` as the harness lines must carry them: passed, failed (an error
/// too), and nothing for a skipped test; ids relative to /testbed as validation keeps them.
#[track_caller]
fn expected(parser: &str, log: &str) -> Vec<(String, String)> {
    let parsed = kiln_testlog::parse(parser, log)
        .expect("parses")
        .relative_to("/testbed");
    parsed
        .statuses
        .iter()
        .filter_map(|(id, status)| {
            let word = match status.as_str() {
                "pass" => "PASSED",
                "skip" => return None,
                _ => "FAILED",
            };
            Some((id.clone(), word.to_string()))
        })
        .collect()
}

#[track_caller]
fn check_format(parser: &str, logs: &[(String, String)]) {
    // Not `unwrap_or_else`: a panic in a closure would not point at the caller.
    let Some(script) = id_script(parser) else {
        panic!("{parser} has an id script");
    };
    assert_eq!(harness_parsers(parser).last(), Some(&"parse_log_jest_json"));
    let shims = if script.starts_with("awk") {
        other_awks()
    } else {
        vec![String::new()]
    };
    for (name, log) in logs {
        let want = expected(parser, log);
        assert!(!want.is_empty(), "{name}: kiln reads no test that ran");
        for shim in &shims {
            let printed = run_script(shim, &script, log);
            let read: Vec<(String, String)> = harness_parse("parse_log_jest_json", &printed)
                .expect("ported")
                .into_iter()
                .collect();
            assert_eq!(read, want, "{parser} {name} with {shim:?}:\n{printed}");
        }
    }
}

/// Every log of `tests/data/<dir>`, plus each with its paths moved under /testbed.
fn logs(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(dir);
    let mut found: Vec<(String, String)> = std::fs::read_dir(&root)
        .expect("data dir")
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).expect("log"))
        })
        .collect();
    found.sort();
    let moved: Vec<(String, String)> = found
        .iter()
        .filter(|(_, log)| log.contains("/tmp/jsproj/"))
        .map(|(name, log)| {
            (
                format!("{name} under /testbed"),
                log.replace("/tmp/jsproj/", "/testbed/"),
            )
        })
        .collect();
    found.extend(moved);
    found
}

#[test]
fn report_scripts_print_the_ids_kiln_reads() {
    for parser in ["jest-json", "vitest-json", "mocha-json"] {
        check_format(parser, &logs(parser));
    }
}

#[test]
fn tap_and_ctest_scripts_print_the_ids_kiln_reads() {
    let mut tap = logs("tap");
    // Directives, escaped hashes, numbers without descriptions, timing suffixes, an unclosed
    // subtest and a second stream.
    tap.push((
        "edge cases".into(),
        "TAP version 13\n\
         ok 1 - plain \\# not a directive\n\
         ok 2 # SKIP no database\n\
         not ok 3 - todo one # TODO later\n\
         not ok 4\n\
         ok 5 - timed (12 ms)\n\
         # Subtest: group\n    ok 1 - inner\n    not ok 2 - inner fails\nnot ok 6 - group\n\
         # Subtest: open\n    ok 1 - left open\n\
         TAP version 13\n\
         ok 1 - second stream\n\
         1..1\n"
            .into(),
    ));
    check_format("tap", &tap);
    let mut node = logs("node-test");
    // A run of markdown-it's shape (spec reporter, as node 23+ prints without a terminal):
    // nested parents, a result that closes its parent, a `#` inside a name, a test's console
    // line at column 0 that looks like a `prove` header, the failure list, a second run.
    node.push((
        "spec edge cases".into(),
        "▶ CommonMark\n  ▶ spec.txt\n    ✔ line 354 (9.42ms)\n    ✖ line 361 (0.69ms)\n  \
         ✔ spec.txt (12ms)\n✖ CommonMark (13ms)\nloading fixtures ...\n✔ issue #12 stays (1ms)\n\
         ✔ todo later (0.1ms) # TODO\n﹣ skipped one (0.1ms) # SKIP\nℹ tests 5\n\n\
         ✖ failing tests:\n\ntest at test/a.mjs:3:1\n✖ line 361 (0.69ms)\n  Error: x\n\
         ✔ second run (1ms)\n"
            .into(),
    ));
    check_format("node-test", &node);
    let mut ctest = logs("ctest");
    ctest.push((
        "long names".into(),
        "1/3 Test #1: a_name_longer_than_the_dots_allow   Passed    0.01 sec\n\
         2/3 Test #2: crashes ..........................***Exception: SegFault  0.02 sec\n\
         3/3 Test #3: missing ..........................***Not Run   0.00 sec\n"
            .into(),
    ));
    check_format("ctest", &ctest);
}

#[test]
fn the_go_json_script_prints_the_ids_kiln_reads() {
    let mut go = logs("go-test-json");
    // Escapes in names, a test that never finished, a package that failed without a failed
    // test, and test2json turning a test's own `--- FAIL` output into an event without a run.
    go.push((
        "edge cases".into(),
        concat!(
            r#"{"Action":"run","Package":"example.com/a","Test":"TestQuote/\"x\"_\u003c1\u003e"}"#,
            "\n",
            r#"{"Action":"pass","Package":"example.com/a","Test":"TestQuote/\"x\"_\u003c1\u003e"}"#,
            "\n",
            r#"{"Action":"run","Package":"example.com/a","Test":"TestHangs"}"#,
            "\n",
            r#"{"Action":"fail","Package":"example.com/a","Test":"TestNested"}"#,
            "\n",
            r#"{"Action":"output","Package":"example.com/b","Output":"{\"Action\":\"pass\"}\n"}"#,
            "\n",
            r#"{"Action":"fail","Package":"example.com/b"}"#,
            "\n",
            "FAIL\texample.com/c [build failed]\n",
        )
        .into(),
    ));
    check_format("go-test-json", &go);
}

#[test]
fn the_junit_script_prints_the_ids_kiln_reads() {
    let mut junit = logs("junit-xml");
    // Reports after other output, entities, a CDATA section and a comment holding tag-like text,
    // a status attribute, pytest's expected failure, a failure then an error, single quotes,
    // and a report that breaks off inside a test case.
    junit.push((
        "edge cases".into(),
        "[INFO] Tests run: 5\n\
         <?xml version=\"1.0\"?>\n\
         <testsuite name=\"s\" tests=\"6\">\n\
         <!-- <testcase name=\"commented\"/> -->\n\
         <testcase classname=\"a.B\" name=\"cmp &lt;1&gt; &amp; &quot;x&quot; &#65;\"/>\n\
         <testcase classname='a.B' name='quoted' time='0.1'><system-out><![CDATA[<failure>not one</failure>]]></system-out></testcase>\n\
         <testcase classname=\"a.B\" name=\"notrun\" status=\"notrun\"/>\n\
         <testcase classname=\"t\" name=\"xf\"><skipped type=\"pytest.xfail\" message=\"x\"/></testcase>\n\
         <testcase classname=\"t\" name=\"both\"><failure message=\"f\"/><error message=\"e\"/></testcase>\n\
         <testcase classname=\"t\" name=\"t\"><skipped/></testcase>\n\
         </testsuite>\n\
         <?xml version=\"1.0\"?>\n\
         <testsuite name=\"cut\"><testcase classname=\"c\" name=\"cut off\"><failure>\n"
            .into(),
    ));
    check_format("junit-xml", &junit);
}

/// Without its interpreter a script prints no id and still exits 0, so that an eval script's
/// `pipefail` never reports the script's failure as the test command's exit code.
#[test]
fn a_script_without_its_interpreter_prints_nothing_and_exits_0() {
    let script = id_script("mocha-json").expect("a script");
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .env("PATH", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .expect("sh");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        harness_parse("parse_log_jest_json", &String::from_utf8_lossy(&out.stdout)),
        Some(Default::default())
    );
}

#[test]
fn formats_the_harness_reads_as_printed_have_no_script() {
    for parser in ["pytest", "cargo", "go-test", "status-lines"] {
        assert!(id_script(parser).is_none(), "{parser}");
    }
}
