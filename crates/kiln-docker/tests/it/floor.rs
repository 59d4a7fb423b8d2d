//! The engine's free-space floor (`Limits::min_free_bytes`) against the real engine: a writer
//! that no layer walk sees is stopped, and nothing else is.

use std::time::{Duration, Instant};

use kiln_core::{ContainerRuntime, DiskBound, ExecSpec, RuntimeError};

use crate::support::{BASE, Guard, run, runtime, spec, start, unique};

/// Opens a file, unlinks it and writes zeros into it, at most `mib` MiB: the blocks it takes
/// leave the filesystem's free bytes, but the writable layer holds no file to measure.
fn unlinked_writer(mib: u64) -> String {
    format!(
        "exec 3>/tmp/unlinked && rm /tmp/unlinked && \
         dd if=/dev/zero bs=1M count={mib} >&3 2>/dev/null; echo wrote"
    )
}

/// Bytes free under the engine's data root now.
async fn free_now(runtime: &impl ContainerRuntime) -> u64 {
    let (_, free) = runtime
        .free_bytes()
        .await
        .unwrap()
        .expect("a local engine's data root");
    free
}

#[tokio::test]
async fn a_writer_of_an_unlinked_file_is_stopped_when_the_engines_disk_goes_under_min_free() {
    let rt = runtime().await;
    let (root, free) = rt
        .free_bytes()
        .await
        .unwrap()
        .expect("a local engine's data root");
    // A floor 1 GiB under what is free now: the writer crosses it after some 1 GiB, and, not
    // stopped, would write 3 GiB and end by itself.
    let floor = free - (1 << 30);
    let mut floored = spec("floor");
    floored.limits.min_free_bytes = i64::try_from(floor).unwrap();
    let writer = start(&rt, &floored).await;
    let idle = start(&rt, &floored).await;
    let started = Instant::now();
    let mut sink = |_: &[u8]| {};
    let exec = ExecSpec::new(unlinked_writer(3 << 10), Duration::from_secs(120));
    let result = rt.exec(&writer.0, &exec, &mut sink).await;
    let took = started.elapsed();
    let Err(RuntimeError::DiskExceeded {
        bound:
            DiskBound::EngineFloor {
                root: seen_root,
                free: free_at_stop,
                floor: seen_floor,
                writing,
            },
        ..
    }) = &result
    else {
        panic!("expected the engine's floor, got {result:?}");
    };
    assert_eq!(seen_root, &root);
    assert_eq!(*seen_floor, floor);
    assert!(*free_at_stop < floor, "{free_at_stop} against {floor}");
    assert!(*writing > 0);
    assert!(
        result
            .as_ref()
            .err()
            .is_some_and(RuntimeError::is_item_failure)
    );
    let message = result.as_ref().err().map(ToString::to_string).unwrap();
    assert!(
        message.contains("went under [docker] min_free"),
        "{message}"
    );
    eprintln!(
        "floor {} MiB under the free space: stopped {:.1} s after the writer started, \
         {} MiB written by then (free space before less free space at the stop), \
         {} MiB written lately by the writer's own measure",
        (free - floor) >> 20,
        took.as_secs_f64(),
        (free - free_at_stop) >> 20,
        writing >> 20
    );
    // Stopped long before its 3 GiB.
    assert!(free - free_at_stop < 3 << 30, "{free_at_stop}");
    // The stopped writer's file went with its processes: the space is back.
    let waited = Instant::now();
    while free_now(&rt).await < floor && waited.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(free_now(&rt).await >= floor);
    // The runtime's other container wrote nothing: it still runs.
    let (still, _) = run(
        &rt,
        &idle.0,
        &ExecSpec::new("echo up", Duration::from_secs(10)),
    )
    .await;
    assert_eq!(still.exit_code, 0, "{}", still.output);
    rt.remove(&writer.0).await.unwrap();
    rt.remove(&idle.0).await.unwrap();
}

#[tokio::test]
async fn under_min_free_another_programs_writer_and_a_light_writer_keep_running() {
    let rt = runtime().await;
    // A floor already crossed: the watch looks at every container from its first round.
    let mut floored = spec("floor-others");
    floored.limits.min_free_bytes = i64::try_from(free_now(&rt).await + (1 << 30)).unwrap();
    let light = start(&rt, &floored).await;
    // Another program's container (no `kiln.managed` label), writing an unlinked file in
    // steps, some 1 GiB over 5 s.
    let foreign = std::process::Command::new("docker")
        .args([
            "run",
            "-d",
            "--label",
            &format!("kiln.test={}", unique("floor-foreign")),
            BASE,
            "sh",
            "-c",
            "exec 3>/tmp/u && rm /tmp/u && for i in $(seq 40); do \
             dd if=/dev/zero bs=1M count=25 >&3 2>/dev/null; sleep 0.1; done; sleep 600",
        ])
        .output()
        .unwrap();
    assert!(foreign.status.success(), "{foreign:?}");
    let foreign = Guard(kiln_core::ContainerId(
        String::from_utf8_lossy(&foreign.stdout).trim().to_string(),
    ));
    // kiln's container writes a little (a test's logs) while the other program writes, and
    // is not blamed for it.
    let (waited, _) = run(
        &rt,
        &light.0,
        &ExecSpec::new(
            "head -c 4M /dev/zero >/tmp/logs && sleep 6",
            Duration::from_secs(30),
        ),
    )
    .await;
    assert_eq!(waited.exit_code, 0, "{}", waited.output);
    let state = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", &foreign.0.0])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&state.stdout).trim(), "true");
    drop(foreign);
    rt.remove(&light.0).await.unwrap();
}
