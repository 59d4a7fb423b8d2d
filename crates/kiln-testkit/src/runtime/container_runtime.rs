//! The [`ContainerRuntime`] implementation of [`ScriptedRuntime`]: every engine call logged
//! and checked for an injected fault, then answered from the bookkeeping (scripts, images,
//! containers and their files) the way the engine would answer it.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use kiln_core::capture::HeadTail;
use kiln_core::runtime::LABEL_MANAGED;
use kiln_core::{
    ArchiveSink, ContainerId, ContainerInfo, ContainerRuntime, ContainerSpec, EngineInfo,
    ExecOutcome, ExecSpec, FsChange, ImageBuild, ImageInfo, OutputSink, RuntimeError,
};
use sha2::{Digest, Sha256};

use super::calls::Call;
use super::container::{Container, ExecRecord, ExecResult};
use super::files::{CopiedIn, changes, tar_files};
use super::images::{Image, ImageOrigin};
use super::script::{Answer, End, choose};
use super::scripted::ScriptedRuntime;
use super::state::State;

#[async_trait]
impl ContainerRuntime for ScriptedRuntime {
    async fn ping(&self) -> Result<EngineInfo, RuntimeError> {
        self.state().enter(Call::Ping)?;
        Ok(EngineInfo {
            version: "scripted".into(),
            api_version: "1.47".into(),
        })
    }

    async fn image_exists(&self, image: &str) -> Result<bool, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ImageExists(image.to_string()))?;
        Ok(state.images.find(image).is_some())
    }

    async fn free_bytes(&self) -> Result<Option<(String, u64)>, RuntimeError> {
        Ok(self
            .state()
            .free_bytes
            .map(|free| ("/var/lib/docker".to_string(), free)))
    }

    async fn image_id(&self, image: &str) -> Result<Option<String>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ImageExists(image.to_string()))?;
        Ok(state.images.find(image).map(|i| i.id.clone()))
    }

    async fn list_images(&self, label: &str, value: &str) -> Result<Vec<ImageInfo>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListImages(label.to_string(), value.to_string()))?;
        Ok(state.images.infos(|image| {
            matches!(image.labels.get(label), Some(found) if value.is_empty() || found == value)
        }))
    }

    async fn list_all_images(&self) -> Result<Option<Vec<ImageInfo>>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListImages(String::new(), String::new()))?;
        Ok(Some(state.images.infos(|_| true)))
    }

    async fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListContainers)?;
        Ok(state
            .containers
            .iter()
            .filter(|c| !c.removed)
            .map(|c| ContainerInfo {
                id: c.id.0.clone(),
                image: c.image_id.clone(),
                running: c.stopped.is_none(),
                labels: c.labels.clone(),
                // The scripted engine keeps no clock: unknown, so any image may be its commit.
                created: 0,
            })
            .collect())
    }

    async fn build_image(
        &self,
        build: &ImageBuild,
        on_output: OutputSink<'_>,
    ) -> Result<(), RuntimeError> {
        {
            let mut state = self.state();
            state.enter(Call::BuildImage(build.tag.clone()))?;
            state.builds.push(build.clone());
            let mut image = state.new_image(&build.tag, ImageOrigin::Built);
            image.labels = managed(&build.labels);
            state.images.put(image);
        }
        on_output(format!("[scripted] built {}\n", build.tag).as_bytes());
        Ok(())
    }

    async fn create(&self, spec: &ContainerSpec) -> Result<ContainerId, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::Create {
            image: spec.image.clone(),
            id: None,
        })?;
        let Some(image) = state.images.find(&spec.image).cloned() else {
            return Err(RuntimeError::ImageNotFound(spec.image.clone()));
        };
        let id = ContainerId(state.fresh_id("scripted-"));
        if let Some(Call::Create { id: logged, .. }) = state.calls.last_mut() {
            *logged = Some(id.clone());
        }
        let mut env = image.env.clone();
        merge_env(&mut env, &spec.env);
        state.containers.push(Container {
            id: id.clone(),
            spec: spec.clone(),
            image_id: image.id.clone(),
            labels: managed(&spec.labels),
            env,
            image_files: image.files,
            image_history: image.history,
            copied_in: Vec::new(),
            image_fs: image.fs.clone(),
            fs: image.fs,
            execs: Vec::new(),
            commits: Vec::new(),
            stopped: None,
            removed: false,
            cpu: Duration::ZERO,
        });
        Ok(id)
    }

    async fn exec(
        &self,
        id: &ContainerId,
        exec: &ExecSpec,
        on_output: OutputSink<'_>,
    ) -> Result<ExecOutcome, RuntimeError> {
        let answer = answer(&mut self.state(), id, exec)?;
        // The sink is the caller's code: it runs without the lock held.
        if !answer.output.is_empty() {
            on_output(answer.output.as_bytes());
        }
        outcome(answer, exec)
    }

    async fn copy_in(&self, id: &ContainerId, dir: &str, tar: Vec<u8>) -> Result<(), RuntimeError> {
        let mut state = self.state();
        state.enter(Call::CopyIn {
            container: id.clone(),
            dir: dir.to_string(),
        })?;
        let container = state.container(id).ok_or_else(|| {
            RuntimeError::engine(format!("copy into {dir} of {}", id.0), "no such container")
        })?;
        let copied = CopiedIn {
            dir: dir.to_string(),
            tar,
        };
        for (path, contents) in tar_files(&copied) {
            container.fs.insert(path, contents);
        }
        container.copied_in.push(copied);
        Ok(())
    }

    async fn copy_out(&self, id: &ContainerId, path: &str) -> Result<Vec<u8>, RuntimeError> {
        self.archive(id, path)?.ok_or_else(|| {
            RuntimeError::engine(
                format!("copy {path} out of {}", id.0),
                "no such file or directory in the container",
            )
        })
    }

    async fn stream_out(
        &self,
        id: &ContainerId,
        path: &str,
        sink: ArchiveSink<'_>,
    ) -> Result<bool, RuntimeError> {
        let Some(tar) = self.archive(id, path)? else {
            return Ok(false);
        };
        // In pieces, as the engine streams it.
        for piece in tar.chunks(4096) {
            sink(piece).map_err(|e| RuntimeError::engine(format!("read {path}"), e))?;
        }
        Ok(true)
    }

    async fn cpu_used(&self, id: &ContainerId) -> Result<Option<Duration>, RuntimeError> {
        // Not a call of the log: sessions read it after every command.
        let state = self.state();
        Ok(state
            .containers
            .iter()
            .find(|c| &c.id == id && !c.removed && c.stopped.is_none())
            .map(|c| c.cpu)
            .filter(|cpu| !cpu.is_zero()))
    }

    async fn changes(&self, id: &ContainerId) -> Result<Vec<FsChange>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::Changes(id.clone()))?;
        let container = state.container(id).ok_or_else(|| {
            RuntimeError::engine(format!("list the changes of {}", id.0), "no such container")
        })?;
        Ok(changes(&container.fs, &container.image_fs))
    }

    async fn commit(
        &self,
        id: &ContainerId,
        tag: &str,
        labels: &BTreeMap<String, String>,
        env: &[(String, String)],
    ) -> Result<String, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::Commit {
            container: id.clone(),
            tag: tag.to_string(),
        })?;
        let mut image = state.new_image(tag, ImageOrigin::Committed(id.clone()));
        let container = state.container(id).ok_or_else(|| {
            RuntimeError::engine(format!("commit {} to {tag}", id.0), "no such container")
        })?;
        container.commits.push(tag.to_string());
        image.env.clone_from(&container.env);
        merge_env(&mut image.env, env);
        image.labels = labels.clone();
        image.fs = container.fs.clone();
        image.files = container
            .image_files
            .iter()
            .chain(&container.copied_in)
            .cloned()
            .collect();
        image.history = container
            .image_history
            .iter()
            .cloned()
            .chain(container.execs.iter().map(|e| e.script.clone()))
            .collect();
        let from = container.spec.image.clone();
        if let Some(parent) = state.images.find(&from) {
            image.parent.clone_from(&parent.id);
            image.size += parent.size;
        }
        let image_id = image.id.clone();
        state.images.put(image);
        Ok(image_id)
    }

    async fn remove(&self, id: &ContainerId) -> Result<(), RuntimeError> {
        let mut state = self.state();
        state.enter(Call::Remove(id.clone()))?;
        if let Some(container) = state.container(id) {
            container.removed = true;
        }
        Ok(())
    }

    async fn remove_image(&self, tag: &str) -> Result<(), RuntimeError> {
        let mut state = self.state();
        state.enter(Call::RemoveImage(tag.to_string()))?;
        state.images.remove(tag);
        Ok(())
    }

    async fn remove_labelled(&self, label: &str, value: &str) -> Result<usize, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::RemoveLabelled(label.to_string(), value.to_string()))?;
        let mut removed = 0;
        for container in state.containers.iter_mut().filter(|c| !c.removed) {
            if container.labels.get(label).map(String::as_str) == Some(value) {
                container.removed = true;
                removed += 1;
            }
        }
        Ok(removed)
    }

    async fn list_labelled(
        &self,
        label: &str,
        value: &str,
    ) -> Result<Vec<ContainerId>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListLabelled(label.to_string(), value.to_string()))?;
        Ok(state
            .containers
            .iter()
            .filter(|c| !c.removed && c.labels.get(label).map(String::as_str) == Some(value))
            .map(|c| c.id.clone())
            .collect())
    }

    async fn pull_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<bool, RuntimeError> {
        let pulled = {
            let mut state = self.state();
            state.enter(Call::PullImage(image.to_string()))?;
            if state.images.tagged(image).is_some() {
                true
            } else if state.unpullable {
                false
            } else {
                let pulled = state.new_image(image, ImageOrigin::Pulled);
                state.images.put(pulled);
                true
            }
        };
        let line = if pulled {
            format!("[scripted] pulled {image}\n")
        } else {
            format!("pull {image}: no registry has it\n")
        };
        on_output(line.as_bytes());
        Ok(pulled)
    }

    async fn tag_image(&self, source: &str, target: &str) -> Result<(), RuntimeError> {
        let mut state = self.state();
        state.enter(Call::TagImage(source.to_string(), target.to_string()))?;
        let Some(image) = state.images.tagged(source).cloned() else {
            return Err(RuntimeError::ImageNotFound(source.to_string()));
        };
        state.images.put(Image {
            tag: target.to_string(),
            origin: ImageOrigin::Tagged(source.to_string()),
            ..image
        });
        Ok(())
    }

    async fn push_image(
        &self,
        image: &str,
        on_output: OutputSink<'_>,
    ) -> Result<Option<String>, RuntimeError> {
        let digest = {
            let mut state = self.state();
            state.enter(Call::PushImage(image.to_string()))?;
            let Some(found) = state.images.tagged(image) else {
                return Err(RuntimeError::ImageNotFound(image.to_string()));
            };
            let digest = format!("sha256:{:x}", Sha256::digest(found.id.as_bytes()));
            state.pushed.push(image.to_string());
            digest
        };
        on_output(format!("{image}: digest: {digest} size: 1024\n").as_bytes());
        Ok(Some(digest))
    }

    async fn import_image(
        &self,
        tag: &str,
        _rootfs: &std::path::Path,
        _changes: &[String],
    ) -> Result<(), RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ImportImage(tag.to_string()))?;
        let image = state.new_image(tag, ImageOrigin::Imported);
        state.images.put(image);
        Ok(())
    }

    async fn remove_leftover_images(
        &self,
        label: &str,
        value: &str,
    ) -> Result<usize, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::RemoveLeftoverImages(
            label.to_string(),
            value.to_string(),
        ))?;
        Ok(state.images.remove_leftovers(label, value))
    }
}

/// The answer to `exec` in container `id`, with the exec logged in the container and what
/// the answer does to its files applied: the injected fault, a stopped container, the first
/// script that answers, or the default answer.
fn answer(state: &mut State, id: &ContainerId, exec: &ExecSpec) -> Result<Answer, RuntimeError> {
    let entered = state.enter(Call::Exec {
        container: id.clone(),
        script: exec.script.clone(),
    });
    let State {
        scripts,
        default,
        containers,
        ..
    } = state;
    let Some(container) = containers.iter_mut().find(|c| &c.id == id && !c.removed) else {
        entered?;
        return Err(RuntimeError::engine(
            format!("run a command in {}", id.0),
            "no such container",
        ));
    };
    let mut record = ExecRecord {
        script: exec.script.clone(),
        env: exec.env.clone(),
        workdir: exec.workdir.clone(),
        timeout: exec.timeout,
        output_cap: exec.output_cap,
        result: ExecResult::EngineError(String::new()),
    };
    if let Err(error) = entered {
        // An injected stop is the container's end, as a scripted one is.
        if let RuntimeError::ContainerStopped { exit_code, .. } = &error {
            container.stopped = Some(*exit_code);
        }
        record.result = ExecResult::EngineError(error.to_string());
        container.execs.push(record);
        return Err(error);
    }
    if let Some(exit_code) = container.stopped {
        let error = RuntimeError::ContainerStopped {
            command: kiln_core::shown(&exec.script),
            exit_code,
        };
        record.result = ExecResult::EngineError(error.to_string());
        container.execs.push(record);
        return Err(error);
    }
    let answer = choose(scripts, container, &exec.script).unwrap_or_else(|| default.clone());
    for effect in &answer.effects {
        container.apply(effect);
    }
    if matches!(answer.end, End::Finished) {
        container.cpu += answer.duration;
    }
    record.result = match &answer.end {
        End::Finished => ExecResult::Exited {
            exit_code: answer.exit_code,
            timed_out: answer.timed_out,
            oom_killed: answer.oom_killed,
        },
        End::StopsContainer(code) => {
            container.stopped = Some(*code);
            ExecResult::StoppedContainer(*code)
        }
        End::Fails(error) => ExecResult::EngineError(error.to_string()),
    };
    container.execs.push(record);
    Ok(answer)
}

/// What the exec returns for `answer`: its outcome with the output capped as `exec` asks, or
/// the error of a container it stopped or of the engine.
fn outcome(answer: Answer, exec: &ExecSpec) -> Result<ExecOutcome, RuntimeError> {
    match answer.end {
        End::Finished => {}
        End::StopsContainer(exit_code) => {
            return Err(RuntimeError::ContainerStopped {
                command: kiln_core::shown(&exec.script),
                exit_code,
            });
        }
        End::Fails(error) => return Err(error),
    }
    let mut capture = HeadTail::new(exec.output_cap);
    capture.push(answer.output.as_bytes());
    let (output, truncated) = capture.finish();
    let duration = if answer.timed_out {
        answer.duration.max(exec.timeout)
    } else {
        answer.duration
    };
    Ok(ExecOutcome {
        exit_code: answer.exit_code,
        output,
        truncated,
        timed_out: answer.timed_out,
        oom_killed: answer.oom_killed,
        duration,
    })
}

/// `labels` with [`LABEL_MANAGED`], as the engine runtime adds it.
fn managed(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut all = labels.clone();
    all.insert(LABEL_MANAGED.to_string(), "1".to_string());
    all
}

/// Sets each of `extra` in `env`, replacing an earlier value of the same name.
fn merge_env(env: &mut Vec<(String, String)>, extra: &[(String, String)]) {
    for (name, value) in extra {
        env.retain(|(k, _)| k != name);
        env.push((name.clone(), value.clone()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use std::time::Duration;

    use super::*;
    use crate::runtime::calls::Operation;
    use crate::runtime::script::Script;

    fn spec(image: &str) -> ContainerSpec {
        ContainerSpec {
            image: image.into(),
            ..ContainerSpec::default()
        }
    }

    async fn run(runtime: &dyn ContainerRuntime, id: &ContainerId, script: &str) -> ExecOutcome {
        let mut seen = Vec::new();
        let mut sink = |bytes: &[u8]| seen.extend_from_slice(bytes);
        let outcome = runtime
            .exec(
                id,
                &ExecSpec::new(script, Duration::from_secs(5)),
                &mut sink,
            )
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&seen), outcome.output);
        outcome
    }

    #[tokio::test]
    async fn scripts_answer_in_order_by_match_count_image_and_history() {
        let runtime = ScriptedRuntime::new();
        runtime.add_image("a:1");
        runtime.add_image("b:1");
        runtime.script(
            Script::contains("pytest")
                .after("gold")
                .answer(Answer::ok().output("fixed")),
        );
        runtime.script(
            Script::contains("make")
                .nth(2)
                .answer(Answer::exit(2).output("second")),
        );
        runtime.script(
            Script::contains("make")
                .in_image("b:1")
                .answer(Answer::exit(3)),
        );
        runtime.script(
            Script::regex(r"^pytest\b")
                .unwrap()
                .answers([Answer::exit(1).output("one"), Answer::ok().output("two")]),
        );
        runtime.set_default(Answer::exit(9));
        let a = runtime.create(&spec("a:1")).await.unwrap();
        let b = runtime.create(&spec("b:1")).await.unwrap();
        assert_eq!(run(&runtime, &a, "make").await.exit_code, 9);
        assert_eq!(run(&runtime, &a, "make all").await.output, "second");
        assert_eq!(run(&runtime, &b, "make").await.exit_code, 3);
        assert_eq!(run(&runtime, &a, "pytest -x").await.output, "one");
        assert_eq!(run(&runtime, &a, "pytest -x").await.output, "two");
        assert_eq!(run(&runtime, &a, "pytest -x").await.output, "two");
        assert_eq!(run(&runtime, &b, "apply gold").await.exit_code, 9);
        assert_eq!(run(&runtime, &b, "pytest").await.output, "fixed");
        assert_eq!(
            runtime.container(&a).unwrap().commands(),
            ["make", "make all", "pytest -x", "pytest -x", "pytest -x"]
        );
        assert_eq!(runtime.commands().len(), 8);
    }

    #[tokio::test]
    async fn commits_make_images_that_carry_files_env_and_labels() {
        let runtime = Arc::new(ScriptedRuntime::new());
        let engine: Arc<dyn ContainerRuntime> = Arc::clone(&runtime) as _;
        assert!(matches!(
            engine.create(&spec("missing:1")).await,
            Err(RuntimeError::ImageNotFound(image)) if image == "missing:1"
        ));
        runtime.add_image("base:1");
        let first = engine.create(&spec("base:1")).await.unwrap();
        let tar = kiln_core::session::tar_files(&[("/testbed/a.txt".into(), b"hello".as_slice())])
            .unwrap();
        engine.copy_in(&first, "/", tar).await.unwrap();
        let labels = BTreeMap::from([("kiln.instance".to_string(), "x".to_string())]);
        engine
            .commit(&first, "env:1", &labels, &[("K".into(), "V".into())])
            .await
            .unwrap();
        engine.remove(&first).await.unwrap();
        assert!(engine.image_exists("env:1").await.unwrap());
        let image = runtime.image("env:1").unwrap();
        assert_eq!(image.labels, labels);
        assert_eq!(image.origin, ImageOrigin::Committed(first.clone()));
        let second = engine.create(&spec("env:1")).await.unwrap();
        let container = runtime.container(&second).unwrap();
        assert_eq!(container.env, [("K".to_string(), "V".to_string())]);
        assert_eq!(
            container.file("/testbed/a.txt").as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(container.labels[LABEL_MANAGED], "1");
        let out = engine.copy_out(&second, "/testbed").await.unwrap();
        let mut archive = tar::Archive::new(out.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["testbed/a.txt"]);
        runtime.add_file("/testbed/report.xml", "<xml/>");
        assert!(
            !engine
                .copy_out(&second, "/testbed/report.xml")
                .await
                .unwrap()
                .is_empty()
        );
        assert!(engine.copy_out(&second, "/nowhere").await.is_err());
        engine.remove_image("env:1").await.unwrap();
        assert!(!engine.image_exists("env:1").await.unwrap());
        assert_eq!(runtime.live_containers(), [second]);
    }

    #[tokio::test]
    async fn a_scripted_pytest_run_reads_as_kiln_reads_pytest() {
        let runtime = ScriptedRuntime::new();
        runtime.add_image("a:1");
        let results = [
            ("tests/a.py::t1", "PASSED"),
            ("tests/a.py::t2", "FAILED"),
            ("tests/a.py::t3", "SKIPPED"),
            ("tests/a.py::t4", "ERROR"),
        ];
        runtime.script(Script::contains("pytest").answer(Answer::pytest(&results)));
        let id = runtime.create(&spec("a:1")).await.unwrap();
        let outcome = run(&runtime, &id, "pytest").await;
        assert_eq!(outcome.exit_code, 1);
        let parsed = kiln_testlog::parse("pytest", &outcome.output).unwrap();
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let statuses: Vec<(&str, &str)> = parsed
            .statuses
            .iter()
            .map(|(id, status)| (id.as_str(), status.as_str()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("tests/a.py::t1", "pass"),
                ("tests/a.py::t2", "fail"),
                ("tests/a.py::t3", "skip"),
                ("tests/a.py::t4", "error"),
            ]
        );
        assert_eq!(Answer::pytest(&[("t", "PASSED")]).exit_code, 0);
        assert_eq!(Answer::pytest(&[]).exit_code, 5);
    }

    #[tokio::test]
    async fn faults_stops_timeouts_and_oom() {
        let runtime = ScriptedRuntime::new();
        runtime.add_image("a:1");
        runtime.fail(
            Operation::Create,
            2,
            RuntimeError::Unreachable {
                endpoint: "scripted".into(),
                message: "gone".into(),
            },
        );
        let id = runtime.create(&spec("a:1")).await.unwrap();
        assert!(matches!(
            runtime.create(&spec("a:1")).await,
            Err(RuntimeError::Unreachable { .. })
        ));
        assert!(runtime.create(&spec("a:1")).await.is_ok());
        assert_eq!(runtime.count(Operation::Create), 3);
        runtime.script(Script::contains("slow").answer(Answer::timed_out()));
        runtime.script(Script::contains("big").answer(Answer::oom_killed()));
        runtime.script(Script::contains("kill 1").answer(Answer::stops_container(137)));
        let slow = run(&runtime, &id, "slow").await;
        assert!(slow.timed_out && slow.exit_code == 137 && slow.duration >= Duration::from_secs(5));
        assert!(run(&runtime, &id, "big").await.oom_killed);
        let mut sink = |_: &[u8]| {};
        let exec = ExecSpec::new("kill 1", Duration::from_secs(1));
        assert!(matches!(
            runtime.exec(&id, &exec, &mut sink).await,
            Err(RuntimeError::ContainerStopped { exit_code: 137, .. })
        ));
        let after = ExecSpec::new("true", Duration::from_secs(1));
        assert!(matches!(
            runtime.exec(&id, &after, &mut sink).await,
            Err(RuntimeError::ContainerStopped { .. })
        ));
        let mut capped = ExecSpec::new("long", Duration::from_secs(1));
        capped.output_cap = 10;
        runtime.script(Script::contains("long").answer(Answer::ok().output("x".repeat(100))));
        let other = runtime.create(&spec("a:1")).await.unwrap();
        let outcome = runtime.exec(&other, &capped, &mut sink).await.unwrap();
        assert!(outcome.truncated);
    }
}
