//! The dataset lock: invocations started at the same instant cannot both choose or create a
//! run; the one that gets the lock works, the others are told who holds it.

use std::sync::{Arc, Barrier};

use kiln_core::NullReporter;
use kiln_core::config::Pipeline;
use kiln_pipeline::{PipelineError, RunSelection, Runner};
use kiln_store::StoreError;

fn pipeline(dir: &std::path::Path) -> Pipeline {
    let tasks = dir.join("tasks.jsonl");
    std::fs::write(&tasks, "").unwrap();
    let text = format!(
        "[dataset]\nname = \"locks\"\n[sources.tasks]\nkind = \"ingest\"\npath = {tasks:?}\n\
         [stages.filter]\nkind = \"filter\"\ninputs = [\"tasks\"]\n"
    );
    let path = dir.join("pipeline.toml");
    std::fs::write(&path, text).unwrap();
    Pipeline::load(&path).unwrap()
}

#[test]
fn runs_started_at_the_same_instant_make_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let pipeline = pipeline(tmp.path());
    // Other threads of a process fork children (git, docker) while runners come and go; a
    // child holds the dataset lock's descriptor until it execs.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::process::Command::new("true").status();
            }
        })
    };
    for selection in [RunSelection::ResumeOrNew, RunSelection::New] {
        let racers = 8;
        let barrier = Arc::new(Barrier::new(racers));
        let results: Vec<Result<Runner, PipelineError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..racers)
                .map(|_| {
                    let barrier = Arc::clone(&barrier);
                    let pipeline = pipeline.clone();
                    let selection = selection.clone();
                    scope.spawn(move || {
                        barrier.wait();
                        Runner::open(pipeline, &selection, Arc::new(NullReporter), None)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let opened: Vec<&Runner> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(
            opened.len(),
            1,
            "{selection:?}: not exactly one runner got the dataset: {:?}",
            results
                .iter()
                .filter_map(|r| r.as_ref().err().map(ToString::to_string))
                .collect::<Vec<_>>()
        );
        for result in &results {
            if let Err(e) = result {
                assert!(
                    matches!(e, PipelineError::Store(StoreError::Locked { pid, .. }) if *pid == std::process::id()),
                    "{e}"
                );
                assert!(e.to_string().starts_with("lock "), "{e}");
            }
        }
        drop(results);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spawner.join().unwrap();
    let runs = kiln_store::run_ids(&tmp.path().join("datasets"), "locks").unwrap();
    // One run from the first race (nothing to resume), one from the second (`New`).
    assert_eq!(runs.len(), 2, "{runs:?}");
    // Released with its runner: the next invocation resumes.
    let runner = Runner::open(
        pipeline.clone(),
        &RunSelection::ResumeOrNew,
        Arc::new(NullReporter),
        None,
    )
    .unwrap();
    assert_eq!(runner.run_id(), runs[1]);
}
