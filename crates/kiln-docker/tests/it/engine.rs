//! DockerRuntime against the real engine.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kiln_core::runtime::{LABEL_MANAGED, LABEL_RUN};
use kiln_core::{
    ContainerRuntime, ContainerSpec, DiskBound, ExecSpec, Limits, NetworkMode, RuntimeError,
};
use kiln_docker::DockerRuntime;

use crate::support::{BASE, files_of, run, runtime, sh, spec, start, tar_of, unique};

/// The processes of the container, one command line per line (the base image has no `ps`).
pub const PROCESSES: &str =
    r#"for p in /proc/[0-9]*; do tr '\0' ' ' <"$p/cmdline" 2>/dev/null; echo; done"#;

#[tokio::test]
async fn exec_reports_exit_codes_and_output_in_arrival_order() {
    let rt = runtime().await;
    let mut container_spec = spec("exec");
    container_spec.env = vec![("FROM_SPEC".to_string(), "spec value".to_string())];
    container_spec.workdir = Some("/srv".to_string());
    let c = start(&rt, &container_spec).await;

    let script = "echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2; exit 3";
    let started = Instant::now();
    let (outcome, streamed) = run(&rt, &c.0, &ExecSpec::new(script, Duration::from_secs(10))).await;
    eprintln!(
        "exec round trip with 0.4 s of sleeps: {:?}",
        started.elapsed()
    );
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(outcome.output, "out1\nerr1\nout2\n");
    assert_eq!(streamed, outcome.output.as_bytes());
    assert!(!outcome.timed_out && !outcome.truncated && !outcome.oom_killed);

    // stderr alone, stdout alone.
    let (only_err, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new("echo e >&2", Duration::from_secs(10)),
    )
    .await;
    assert_eq!((only_err.exit_code, only_err.output.as_str()), (0, "e\n"));

    // pipefail is on: a failing stage fails the pipeline.
    let (pipe, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new("false | cat", Duration::from_secs(10)),
    )
    .await;
    assert_eq!(pipe.exit_code, 1);

    // Environment and working directory: the spec's defaults, then the exec's own.
    assert_eq!(
        sh(&rt, &c.0, "echo \"$FROM_SPEC\"; pwd").await,
        "spec value\n/srv\n"
    );
    let mut exec = ExecSpec::new(
        "echo \"$FROM_EXEC\" \"$FROM_SPEC\"; pwd",
        Duration::from_secs(10),
    );
    exec.env = vec![("FROM_EXEC".to_string(), "x y".to_string())];
    exec.workdir = Some("/tmp".to_string());
    let (outcome, _) = run(&rt, &c.0, &exec).await;
    assert_eq!(outcome.output, "x y spec value\n/tmp\n");

    // Invalid UTF-8 is decoded lossily rather than failing the command.
    assert_eq!(sh(&rt, &c.0, r"printf 'a\377b'").await, "a\u{fffd}b");

    // Round trip of a trivial command, for the report.
    let mut times = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        sh(&rt, &c.0, "true").await;
        times.push(t.elapsed());
    }
    times.sort();
    eprintln!(
        "exec round trip of `true`: median {:?}, max {:?}",
        times[5], times[9]
    );
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn timeout_kills_the_command_and_its_children() {
    let rt = runtime().await;
    let c = start(&rt, &spec("timeout")).await;
    let exec = ExecSpec::new("sleep 32 & echo started; sleep 31", Duration::from_secs(2));
    let (outcome, _) = run(&rt, &c.0, &exec).await;
    assert_eq!(outcome.exit_code, 137, "{outcome:?}");
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(!outcome.oom_killed);
    assert_eq!(outcome.output, "started\n");
    assert!(
        outcome.duration >= Duration::from_secs(2) && outcome.duration < Duration::from_secs(6),
        "took {:?}",
        outcome.duration
    );
    let processes = sh(&rt, &c.0, PROCESSES).await;
    for gone in ["sleep 31 ", "sleep 32 "] {
        assert!(
            !processes.lines().any(|l| l == gone),
            "{gone}still runs:\n{processes}"
        );
    }
    // The container's own process is still there: the check above did see processes.
    assert!(processes.lines().any(|l| l == "sleep 600 "), "{processes}");

    // A SIGKILL before the timeout is not a timeout.
    let (killed, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new("kill -9 $$", Duration::from_secs(10)),
    )
    .await;
    assert_eq!(killed.exit_code, 137);
    assert!(!killed.timed_out && !killed.oom_killed, "{killed:?}");
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn output_is_capped_to_head_and_tail_but_fully_streamed() {
    let rt = runtime().await;
    let c = start(&rt, &spec("cap")).await;
    // stdout and stderr are separate pipes, read by separate engine threads: only writes some
    // time apart keep their order across the two.
    let mut exec = ExecSpec::new(
        "seq 1 100000; sleep 0.3; echo done >&2",
        Duration::from_secs(20),
    );
    exec.output_cap = 1000;
    let (outcome, streamed) = run(&rt, &c.0, &exec).await;
    assert_eq!(outcome.exit_code, 0);
    assert!(outcome.truncated);
    let full: usize = (1..=100_000)
        .map(|n: u32| n.to_string().len() + 1)
        .sum::<usize>()
        + 5;
    assert_eq!(streamed.len(), full);
    assert!(
        outcome.output.starts_with("1\n2\n3\n"),
        "{}",
        &outcome.output[..50]
    );
    assert!(outcome.output.ends_with("99999\n100000\ndone\n"));
    let marker = format!("\n... [{} bytes omitted] ...\n", full - 1000);
    assert!(outcome.output.contains(&marker), "no {marker:?}");
    assert_eq!(outcome.output.len(), 1000 + marker.len() - 1);

    // Exactly at the cap nothing is dropped.
    let mut exact = ExecSpec::new("printf '%0100d' 0", Duration::from_secs(10));
    exact.output_cap = 100;
    let (outcome, _) = run(&rt, &c.0, &exact).await;
    assert!(!outcome.truncated);
    assert_eq!(outcome.output.len(), 100);
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn files_round_trip_through_copy_in_and_copy_out() {
    let rt = runtime().await;
    let c = start(&rt, &spec("copy")).await;
    sh(&rt, &c.0, "mkdir -p /data").await;
    let tar = tar_of(&[
        ("src/app.py", b"print('hi')\n", 0o644),
        ("run.sh", b"#!/bin/sh\necho ran\n", 0o755),
    ]);
    rt.copy_in(&c.0, "/data", tar).await.unwrap();
    assert_eq!(
        sh(&rt, &c.0, "cat /data/src/app.py; /data/run.sh").await,
        "print('hi')\nran\n"
    );

    sh(&rt, &c.0, "echo report > /data/src/out.txt").await;
    let files = files_of(&rt.copy_out(&c.0, "/data/src").await.unwrap());
    let names: Vec<_> = files
        .iter()
        .map(|(p, c, _)| (p.as_str(), c.as_slice()))
        .collect();
    assert_eq!(
        names,
        [
            ("src/app.py", &b"print('hi')\n"[..]),
            ("src/out.txt", b"report\n")
        ]
    );
    let run_sh = files_of(&rt.copy_out(&c.0, "/data/run.sh").await.unwrap());
    assert_eq!(run_sh[0].0, "run.sh");
    assert_eq!(run_sh[0].2 & 0o777, 0o755);

    // Errors name what was being done.
    let missing = rt.copy_out(&c.0, "/nope").await.unwrap_err();
    assert!(missing.to_string().contains("/nope"), "{missing}");
    let no_dir = rt
        .copy_in(&c.0, "/nope", tar_of(&[("a", b"a", 0o644)]))
        .await
        .unwrap_err();
    assert!(matches!(no_dir, RuntimeError::Engine { .. }), "{no_dir}");

    // An archive the engine cannot unpack (a GNU sparse entry, type `S` = 83) is refused input,
    // an item's failure: the engine still answers and the container still takes files.
    let mut sparse = tar::Header::new_gnu();
    sparse.set_path("holes.bin").unwrap();
    sparse.set_entry_type(tar::EntryType::GNUSparse);
    sparse.set_size(0);
    sparse.set_mode(0o644);
    sparse.set_cksum();
    let mut archive = sparse.as_bytes().to_vec();
    archive.resize(archive.len() + 1024, 0);
    let refused = rt.copy_in(&c.0, "/data", archive).await.unwrap_err();
    assert!(
        matches!(&refused, RuntimeError::Refused { .. }) && refused.is_item_failure(),
        "{refused:?}"
    );
    rt.copy_in(&c.0, "/data", tar_of(&[("after", b"ok", 0o644)]))
        .await
        .unwrap();
    assert_eq!(sh(&rt, &c.0, "cat /data/after").await, "ok");

    // Files written at absolute paths get their missing parents from the engine, and the
    // existing ones keep their modes: `/tmp` stays sticky and world-writable.
    let files = kiln_core::session::tar_files(&[
        ("/tmp/kiln-x/y/file".into(), b"deep".as_slice()),
        ("/data/top".into(), b"top".as_slice()),
    ])
    .unwrap();
    rt.copy_in(&c.0, "/", files).await.unwrap();
    assert_eq!(
        sh(
            &rt,
            &c.0,
            "cat /tmp/kiln-x/y/file /data/top; echo; stat -c '%a %n' /tmp /tmp/kiln-x/y /tmp/kiln-x/y/file"
        )
        .await,
        "deeptop\n1777 /tmp\n755 /tmp/kiln-x/y\n644 /tmp/kiln-x/y/file\n"
    );
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn committed_images_run_with_the_container_state() {
    let rt = runtime().await;
    let mut container_spec = spec("commit");
    container_spec.env = vec![("KEEP".to_string(), "kept".to_string())];
    container_spec.workdir = Some("/state".to_string());
    let c = start(&rt, &container_spec).await;
    sh(
        &rt,
        &c.0,
        "mkdir -p /state && echo installed > /state/marker",
    )
    .await;
    let tag = format!("kiln-it/commit:{}", unique("commit"));
    let labels = BTreeMap::from([("kiln.step".to_string(), "install".to_string())]);
    let started = Instant::now();
    // An added variable joins the container's own (KEEP, PATH), quotes and spaces intact.
    let env = vec![("ADDED".to_string(), "a \"quoted\" value".to_string())];
    let image_id = rt.commit(&c.0, &tag, &labels, &env).await.unwrap();
    eprintln!("commit of a small container: {:?}", started.elapsed());
    assert!(image_id.starts_with("sha256:"), "{image_id}");
    // As listed (what `kiln gc` reads): the container's labels, and a creation time no later
    // than its commit's.
    let listed = rt.list_containers().await.unwrap();
    let container = listed.iter().find(|l| l.id == c.0.0).unwrap();
    assert_eq!(
        container.labels.get(LABEL_MANAGED).map(String::as_str),
        Some("1")
    );
    let committed = rt
        .list_all_images()
        .await
        .unwrap()
        .unwrap_or_default()
        .into_iter()
        .find(|i| i.id == image_id)
        .unwrap();
    assert!(
        container.created > 0 && container.created <= committed.created,
        "{} against {}",
        container.created,
        committed.created
    );
    rt.remove(&c.0).await.unwrap();

    assert!(rt.image_exists(&tag).await.unwrap());
    let inspected = rt.client().inspect_image(&tag).await.unwrap();
    let image_labels = inspected.config.unwrap().labels.unwrap();
    assert_eq!(
        image_labels.get("kiln.step").map(String::as_str),
        Some("install")
    );
    assert_eq!(
        image_labels.get(LABEL_MANAGED).map(String::as_str),
        Some("1")
    );

    let mut from_commit = spec("commit");
    from_commit.image = tag.clone();
    let c2 = start(&rt, &from_commit).await;
    assert_eq!(
        sh(
            &rt,
            &c2.0,
            "cat marker; echo $KEEP; echo \"$ADDED\"; command -v sh"
        )
        .await,
        "installed\nkept\na \"quoted\" value\n/usr/bin/sh\n"
    );
    rt.remove(&c2.0).await.unwrap();

    rt.remove_image(&tag).await.unwrap();
    assert!(!rt.image_exists(&tag).await.unwrap());
    // Removing again is not an error.
    rt.remove_image(&tag).await.unwrap();
}

#[tokio::test]
async fn labelled_containers_are_listed_and_removed() {
    let rt = runtime().await;
    let run_label = unique("labels");
    let mut a = spec("labels");
    a.labels.insert("kiln.role".to_string(), "a".to_string());
    // One container has stopped already: it must be listed and removed too.
    let mut stopped = spec("labels");
    stopped.max_lifetime = Duration::from_secs(1);
    let other = spec("labels-other");
    let (ca, cs, co) = (
        start(&rt, &a).await,
        start(&rt, &stopped).await,
        start(&rt, &other).await,
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let inspected = rt.client().inspect_container(&ca.0.0, None).await.unwrap();
    let labels = inspected.config.unwrap().labels.unwrap();
    assert_eq!(labels.get(LABEL_MANAGED).map(String::as_str), Some("1"));
    assert_eq!(labels.get("kiln.role").map(String::as_str), Some("a"));
    let state = rt
        .client()
        .inspect_container(&cs.0.0, None)
        .await
        .unwrap()
        .state
        .unwrap();
    assert_eq!(
        state.running,
        Some(false),
        "max_lifetime did not stop the container"
    );

    let mut listed = rt.list_labelled(LABEL_RUN, &run_label).await.unwrap();
    listed.sort_by(|x, y| x.0.cmp(&y.0));
    let mut expected = vec![ca.0.clone(), cs.0.clone()];
    expected.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(listed, expected);

    assert_eq!(rt.remove_labelled(LABEL_RUN, &run_label).await.unwrap(), 2);
    assert!(
        rt.list_labelled(LABEL_RUN, &run_label)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(rt.remove_labelled(LABEL_RUN, &run_label).await.unwrap(), 0);
    // The other run's container is untouched; removing a removed container is fine.
    assert_eq!(
        rt.list_labelled(LABEL_RUN, &unique("labels-other"))
            .await
            .unwrap(),
        std::slice::from_ref(&co.0)
    );
    rt.remove(&ca.0).await.unwrap();
    rt.remove(&co.0).await.unwrap();
}

/// Reads the first cgroup file that exists (cgroup v2 path, then v1).
fn cgroup(v2: &str, v1: &str) -> String {
    format!("cat /sys/fs/cgroup/{v2} 2>/dev/null || cat /sys/fs/cgroup/{v1}")
}

/// Sessions closed in the background are gone once their `Removals` is waited for.
#[tokio::test]
async fn background_removals_are_done_when_waited_for() {
    let rt: std::sync::Arc<dyn ContainerRuntime> = std::sync::Arc::new(runtime().await);
    let run_label = unique("removals");
    let log_dir = tempfile::tempdir().unwrap();
    let removals = kiln_core::Removals::default();
    for n in 0..3 {
        let mut session = kiln_core::Session::start(
            std::sync::Arc::clone(&rt),
            &spec("removals"),
            &log_dir.path().join(format!("{n}.log")),
        )
        .await
        .unwrap();
        // A container with files in its writable layer, as a build leaves it.
        let outcome = session
            .run(
                "mkdir -p /tree && for i in $(seq 500); do echo $i > /tree/$i; done",
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        assert_eq!(outcome.exit_code, 0, "{}", outcome.output);
        session.close_later(&removals);
    }
    let failed = removals.wait().await;
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        rt.list_labelled(LABEL_RUN, &run_label)
            .await
            .unwrap()
            .is_empty(),
        "containers left after wait"
    );
    // Waiting again has nothing to wait for.
    assert!(removals.wait().await.is_empty());
}

#[tokio::test]
async fn limits_and_network_are_applied() {
    let rt = runtime().await;
    let mut limited = spec("limits");
    limited.limits = Limits {
        memory_bytes: 256 << 20,
        cpus: 0.5,
        pids: 64,
        disk_bytes: 1 << 30,
        min_free_bytes: 0,
    };
    limited.network = NetworkMode::None;
    let c = start(&rt, &limited).await;
    let memory = sh(
        &rt,
        &c.0,
        &cgroup("memory.max", "memory/memory.limit_in_bytes"),
    )
    .await;
    assert_eq!(memory.trim(), (256u64 << 20).to_string());
    let swap = sh(
        &rt,
        &c.0,
        &cgroup("memory.swap.max", "memory/memory.memsw.limit_in_bytes"),
    )
    .await;
    // v1 counts memory+swap together (equal to memory: no swap); v2 counts swap alone.
    assert!(
        ["268435456", "0"].contains(&swap.trim()),
        "swap limit {swap}"
    );
    let pids = sh(&rt, &c.0, &cgroup("pids.max", "pids/pids.max")).await;
    assert_eq!(pids.trim(), "64");
    let cpu = sh(
        &rt,
        &c.0,
        "cat /sys/fs/cgroup/cpu.max 2>/dev/null || \
         echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)",
    )
    .await;
    assert_eq!(cpu.trim(), "50000 100000");
    assert_eq!(sh(&rt, &c.0, "ls /sys/class/net").await, "lo\n");
    // The init process reaps and forwards signals; the main process is the lifetime sleep.
    let processes = sh(&rt, &c.0, PROCESSES).await;
    assert!(
        processes
            .lines()
            .any(|l| l.starts_with("/sbin/docker-init")),
        "{processes}"
    );

    rt.remove(&c.0).await.unwrap();
}

/// Writes `mib` MiB of zeros to `path` as fast as the disk takes them (a file of real blocks).
fn writer(path: &str, mib: u64) -> String {
    format!("dd if=/dev/zero of={path} bs=1M count={mib} 2>&1; sync; echo wrote")
}

#[tokio::test]
async fn a_container_writing_past_its_disk_bound_is_stopped_and_the_command_told() {
    let rt = runtime().await;
    let bound: i64 = 200 << 20;
    let mut bounded = spec("disk");
    bounded.limits.disk_bytes = bound;
    let c = start(&rt, &bounded).await;
    // Under the bound: nothing happens.
    let (small, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new(writer("/small", 50), Duration::from_secs(60)),
    )
    .await;
    assert_eq!(small.exit_code, 0, "{}", small.output);
    // Past it: 4 GiB asked, the container stopped long before.
    let started = Instant::now();
    let mut sink = |_: &[u8]| {};
    let exec = ExecSpec::new(writer("/big", 4096), Duration::from_secs(300));
    let result = rt.exec(&c.0, &exec, &mut sink).await;
    let took = started.elapsed();
    let Err(RuntimeError::DiskExceeded {
        bound: DiskBound::Container { written, limit },
        ..
    }) = &result
    else {
        panic!("expected the disk bound, got {result:?}");
    };
    assert!(
        result
            .as_ref()
            .err()
            .is_some_and(RuntimeError::is_item_failure)
    );
    assert_eq!(*limit, bound);
    assert!(*written > bound, "{written}");
    eprintln!(
        "disk bound {} MiB: stopped at {} MiB written, {:.1} s after the writer started",
        bound >> 20,
        written >> 20,
        took.as_secs_f64()
    );
    // One watch interval past the bound at most, at this disk's speed.
    assert!(*written < 4096 << 20, "{written}");
    rt.remove(&c.0).await.unwrap();

    // A writer left behind in the background, after its command returned, is stopped too,
    // and the next command is told why.
    let c = start(&rt, &bounded).await;
    let (detached, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new(
            format!("nohup sh -c '{}' >/dev/null 2>&1 &", writer("/bg", 4096)),
            Duration::from_secs(10),
        ),
    )
    .await;
    assert_eq!(detached.exit_code, 0);
    let waited = Instant::now();
    let next = loop {
        let result = rt
            .exec(
                &c.0,
                &ExecSpec::new("sleep 1", Duration::from_secs(10)),
                &mut sink,
            )
            .await;
        if result.is_err() || waited.elapsed() > Duration::from_secs(120) {
            break result;
        }
    };
    assert!(
        matches!(next, Err(RuntimeError::DiskExceeded { .. })),
        "{next:?}"
    );
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn the_oom_killer_is_reported_for_the_command_it_hit() {
    let rt = runtime().await;
    let mut small = spec("oom");
    small.limits.memory_bytes = 64 << 20;
    let c = start(&rt, &small).await;
    // bash keeps the whole command substitution in memory.
    let hog = "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo ${#x}";
    let (outcome, _) = run(&rt, &c.0, &ExecSpec::new(hog, Duration::from_secs(60))).await;
    assert_eq!(outcome.exit_code, 137, "{outcome:?}");
    assert!(outcome.oom_killed, "{outcome:?}");
    assert!(!outcome.timed_out, "{outcome:?}");
    // A child killed by the OOM killer is reported too, though the command exits 1.
    let child = "(x=$(head -c 300000000 /dev/zero | tr '\\0' a)) || exit 1";
    let (outcome, _) = run(&rt, &c.0, &ExecSpec::new(child, Duration::from_secs(60))).await;
    assert_eq!(outcome.exit_code, 1, "{outcome:?}");
    assert!(outcome.oom_killed, "{outcome:?}");
    // The next command is not blamed for the earlier kill.
    let (after, _) = run(
        &rt,
        &c.0,
        &ExecSpec::new("kill -9 $$", Duration::from_secs(10)),
    )
    .await;
    assert_eq!(after.exit_code, 137);
    assert!(!after.oom_killed, "{after:?}");
    rt.remove(&c.0).await.unwrap();
}

#[tokio::test]
async fn a_missing_image_is_reported_as_such() {
    let rt = runtime().await;
    let spec = ContainerSpec {
        image: "kiln-it/no-such-image:never".to_string(),
        ..spec("missing")
    };
    match rt.create(&spec).await {
        Err(RuntimeError::ImageNotFound(image)) => assert_eq!(image, "kiln-it/no-such-image:never"),
        other => panic!("expected ImageNotFound, got {other:?}"),
    }
    assert!(
        !rt.image_exists("kiln-it/no-such-image:never")
            .await
            .unwrap()
    );
    assert!(rt.image_exists(BASE).await.unwrap());
}

#[tokio::test]
async fn an_unreachable_engine_says_where_it_looked() {
    let err = DockerRuntime::connect_to("unix:///nonexistent.sock")
        .await
        .unwrap_err();
    let RuntimeError::Unreachable { endpoint, message } = &err else {
        panic!("expected Unreachable, got {err:?}");
    };
    assert_eq!(endpoint, "unix:///nonexistent.sock");
    assert!(
        message.contains("no socket at /nonexistent.sock"),
        "{message}"
    );
    assert!(
        err.to_string()
            .starts_with("reach the Docker engine at unix:///nonexistent.sock")
    );

    // Nothing listens on this port: a refused TCP connection is Unreachable too.
    let err = DockerRuntime::connect_to("tcp://127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Unreachable { .. }), "{err:?}");
    let err = DockerRuntime::connect_to("ssh://host").await.unwrap_err();
    assert!(err.to_string().contains("unsupported scheme"), "{err}");
}

/// Runs [`child_connects_where_docker_host_says`] in a child process with `DOCKER_HOST` set
/// (setting it in this process would race the other tests).
#[test]
fn docker_host_is_honoured() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "engine::child_connects_where_docker_host_says",
            "--nocapture",
        ])
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .env("KILN_IT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Only does something in the child process of [`docker_host_is_honoured`].
#[tokio::test]
async fn child_connects_where_docker_host_says() {
    if std::env::var_os("KILN_IT_CHILD").is_none() {
        return;
    }
    match DockerRuntime::connect().await {
        Err(RuntimeError::Unreachable { endpoint, .. }) => {
            assert_eq!(endpoint, "unix:///nonexistent.sock");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_command_that_stops_its_container_is_reported_as_such_not_as_an_exit_code() {
    let rt = runtime().await;
    let c = start(&rt, &spec("stops-itself")).await;
    // As root in the container, the code under test can end the main process; the command's
    // own exit code (137, killed with the container) would otherwise look like a failing test.
    let stopped = rt
        .exec(
            &c.0,
            &ExecSpec::new(
                "echo before; kill -TERM 1; sleep 30",
                Duration::from_secs(60),
            ),
            &mut |_: &[u8]| {},
        )
        .await;
    assert!(
        matches!(&stopped, Err(RuntimeError::ContainerStopped { command, .. }) if command.contains("kill -TERM 1")),
        "{stopped:?}"
    );
    let next = rt
        .exec(
            &c.0,
            &ExecSpec::new("true", Duration::from_secs(10)),
            &mut |_: &[u8]| {},
        )
        .await;
    assert!(
        matches!(next, Err(RuntimeError::ContainerStopped { .. })),
        "{next:?}"
    );
}

/// A unix socket that forwards to the engine until [`Proxy::cut`], which closes the listener
/// and every connection: the engine going away as kiln sees it, without stopping the engine
/// other tests share.
struct Proxy {
    socket: std::path::PathBuf,
    tasks: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    _dir: tempfile::TempDir,
}

impl Proxy {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let tasks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let accepted = std::sync::Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let forward = tokio::spawn(async move {
                    if let Ok(mut engine) =
                        tokio::net::UnixStream::connect("/var/run/docker.sock").await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut engine).await;
                    }
                });
                accepted.lock().unwrap().push(forward);
            }
        });
        tasks.lock().unwrap().push(accept);
        Self {
            socket,
            tasks,
            _dir: dir,
        }
    }

    fn cut(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[tokio::test]
async fn an_engine_that_goes_away_mid_command_is_unreachable_not_a_failed_command() {
    let proxy = Proxy::start();
    let rt = DockerRuntime::connect_to(&format!("unix://{}", proxy.socket.display()))
        .await
        .unwrap();
    let direct = runtime().await;
    let c = start(&direct, &spec("engine-goes-away")).await;
    let long = ExecSpec::new("echo started; sleep 30", Duration::from_secs(60));
    let mut sink = |_: &[u8]| {};
    let exec = rt.exec(&c.0, &long, &mut sink);
    let cut = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        proxy.cut();
    };
    let (outcome, ()) = tokio::join!(exec, cut);
    assert!(
        matches!(outcome, Err(RuntimeError::Unreachable { .. })),
        "{outcome:?}"
    );
    // Every later request fails the same way: the stage stops, it does not write rows.
    let next = rt
        .exec(
            &c.0,
            &ExecSpec::new("true", Duration::from_secs(10)),
            &mut |_: &[u8]| {},
        )
        .await;
    assert!(
        matches!(next, Err(RuntimeError::Unreachable { .. })),
        "{next:?}"
    );
    let created = rt.create(&spec("engine-gone")).await;
    assert!(
        matches!(created, Err(RuntimeError::Unreachable { .. })),
        "{created:?}"
    );
}

/// The engine here runs on this host: its data root and the bytes free under it are known,
/// as `df` reports them.
#[tokio::test]
async fn the_free_bytes_of_a_local_engines_data_root_are_read() {
    let runtime = runtime().await;
    let (root, free) = runtime
        .free_bytes()
        .await
        .unwrap()
        .expect("a local engine's data root");
    assert!(std::path::Path::new(&root).is_dir(), "{root}");
    let df = std::process::Command::new("df")
        .args(["-B1", "--output=avail", &root])
        .output()
        .unwrap();
    let reported: u64 = String::from_utf8_lossy(&df.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap();
    // Other work writes meanwhile: the two readings agree within a gigabyte.
    assert!(
        free.abs_diff(reported) < 1 << 30,
        "{free} against {reported}"
    );
    assert!(free > 0);
}

/// What a container changed since its image is the engine's account (`changes`), and a checkout
/// streamed out of it (`stream_out`) is read entry by entry as it arrives; the checkout scan
/// compares it with a commit's tree, whatever the commands in the container said.
#[tokio::test]
async fn a_containers_changes_and_streamed_checkout_are_read_from_the_engine() {
    use kiln_core::checkout::{Found, Tree, blob_oid, scan};
    use kiln_core::{ChangeKind, FsChange};
    let rt = runtime().await;
    let c = start(&rt, &spec("changes")).await;
    sh(&rt, &c.0, "mkdir -p /testbed").await;
    let files: &[(&str, &[u8])] = &[
        ("src/a.py", b"a = 1\n"),
        ("src/b.py", b"b = 1\n"),
        ("setup.cfg", b"[metadata]\nname = x\n"),
    ];
    let tar = tar_of(
        &files
            .iter()
            .map(|(p, c)| (*p, *c, 0o644))
            .collect::<Vec<_>>(),
    );
    rt.copy_in(&c.0, "/testbed", tar).await.unwrap();
    let image = unique("kiln-test/changes");
    let id = rt
        .commit(&c.0, &image, &std::collections::BTreeMap::new(), &[])
        .await
        .unwrap();
    let after = start(
        &rt,
        &ContainerSpec {
            image: id.clone(),
            ..spec("changes-after")
        },
    )
    .await;
    sh(
        &rt,
        &after.0,
        "echo 'b = 2' > /testbed/src/b.py && rm /testbed/src/a.py && mkdir -p /testbed/tests \
         && echo 'import x' > /testbed/tests/conftest.py && ln -s src/b.py /testbed/link.py",
    )
    .await;
    let changes = rt.changes(&after.0).await.unwrap();
    for expected in [
        ("/testbed/src/b.py", ChangeKind::Modified),
        ("/testbed/src/a.py", ChangeKind::Deleted),
        ("/testbed/tests/conftest.py", ChangeKind::Added),
        ("/testbed/link.py", ChangeKind::Added),
    ] {
        assert!(
            changes.contains(&FsChange {
                path: expected.0.into(),
                kind: expected.1
            }),
            "{expected:?} in {changes:?}"
        );
    }
    let like = "0".repeat(40);
    let tree = Tree::new(
        files
            .iter()
            .map(|(p, c)| ((*p).to_string(), 0o100_644, blob_oid(c, &like))),
        std::collections::BTreeMap::new(),
    );
    let scanned = scan(&rt, &after.0, &tree).await.unwrap();
    assert_eq!(scanned.changed.len(), 2, "{:?}", scanned.changed);
    assert_eq!(scanned.changed["src/a.py"], None);
    assert!(matches!(
        &scanned.changed["src/b.py"],
        Some(Found::File { oid, .. }) if *oid == blob_oid(b"b = 2\n", &like)
    ));
    let mut untracked = scanned.untracked.clone();
    untracked.sort();
    assert_eq!(untracked, ["link.py", "tests/conftest.py"]);
    // A path the container lacks is no error, and no stream.
    let mut sink = |_: &[u8]| -> Result<(), String> { Err("nothing to read".into()) };
    assert!(!rt.stream_out(&after.0, "/nope", &mut sink).await.unwrap());
    rt.remove(&after.0).await.unwrap();
    rt.remove(&c.0).await.unwrap();
    rt.remove_image(&image).await.unwrap();
}

/// The CPU time a container used is the engine's cgroup figure: it grows by what a command
/// spent, as the command's own shell counts it (`times`), and a removed container has none.
#[tokio::test]
async fn a_containers_cpu_time_is_read_from_the_engine() {
    let rt = runtime().await;
    let c = start(&rt, &spec("cpu")).await;
    let before = rt.cpu_used(&c.0).await.unwrap().unwrap_or_default();
    // Work of a fixed size, not of a fixed time: on a loaded machine it takes longer, not less.
    let out = sh(
        &rt,
        &c.0,
        "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; times",
    )
    .await;
    let after = rt
        .cpu_used(&c.0)
        .await
        .unwrap()
        .expect("a running container's CPU");
    // `times` prints the shell's user and system time, then its children's: `0m1.23s 0m0.01s`.
    let seconds: f64 = out
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m')?;
            Some(m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
        })
        .sum();
    let used = after.saturating_sub(before).as_secs_f64();
    assert!(seconds > 0.1, "{out}");
    assert!(
        used >= seconds - 0.05 && used < seconds + 1.0,
        "the cgroup says {used:.3}s, the shell {seconds:.3}s"
    );
    let id = c.0.clone();
    drop(c);
    assert_eq!(rt.cpu_used(&id).await.unwrap(), None);
}
