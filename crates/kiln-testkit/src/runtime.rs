//! A scripted container runtime: [`ScriptedRuntime`] implements kiln's
//! [`ContainerRuntime`] without an engine, so the logic of launch and validate can be tested in
//! milliseconds.
//!
//! Commands are not run. Each exec is answered by the first [`Script`] whose pattern matches
//! the command's script (a substring or a regular expression, optionally only its Nth match,
//! only in containers of one image, or only after another command ran in the same container),
//! or by the default [`Answer`] (exit 0, no output). A script's answers are used in turn, the
//! last one repeating, which models flaky tests. Images are tracked by tag: a commit creates
//! an image later containers can start from, a container from an unknown image fails as the
//! engine does ([`RuntimeError::ImageNotFound`]). Engine failures are injected by call number
//! ([`ScriptedRuntime::fail`]), and every call is logged ([`ScriptedRuntime::calls`],
//! [`ScriptedRuntime::containers`]) for tests to assert on.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kiln_core::capture::HeadTail;
use kiln_core::runtime::{LABEL_MANAGED, LABEL_SCRATCH};
use kiln_core::{
    ArchiveSink, ChangeKind, ContainerId, ContainerInfo, ContainerRuntime, ContainerSpec,
    EngineInfo, ExecOutcome, ExecSpec, FsChange, ImageBuild, ImageInfo, OutputSink, RuntimeError,
};
use regex::Regex;
use sha2::{Digest, Sha256};

/// The operations of [`ContainerRuntime`], for injected failures and call counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// [`ContainerRuntime::ping`].
    Ping,
    /// [`ContainerRuntime::image_exists`] and [`ContainerRuntime::image_id`].
    ImageExists,
    /// [`ContainerRuntime::list_images`].
    ListImages,
    /// [`ContainerRuntime::list_containers`].
    ListContainers,
    /// [`ContainerRuntime::build_image`].
    BuildImage,
    /// [`ContainerRuntime::create`].
    Create,
    /// [`ContainerRuntime::exec`].
    Exec,
    /// [`ContainerRuntime::copy_in`].
    CopyIn,
    /// [`ContainerRuntime::copy_out`] and [`ContainerRuntime::stream_out`].
    CopyOut,
    /// [`ContainerRuntime::changes`].
    Changes,
    /// [`ContainerRuntime::commit`].
    Commit,
    /// [`ContainerRuntime::remove`].
    Remove,
    /// [`ContainerRuntime::remove_image`].
    RemoveImage,
    /// [`ContainerRuntime::remove_labelled`].
    RemoveLabelled,
    /// [`ContainerRuntime::list_labelled`].
    ListLabelled,
    /// [`ContainerRuntime::pull_image`].
    PullImage,
    /// [`ContainerRuntime::tag_image`].
    TagImage,
    /// [`ContainerRuntime::push_image`].
    PushImage,
    /// [`ContainerRuntime::import_image`].
    ImportImage,
    /// [`ContainerRuntime::remove_leftover_images`].
    RemoveLeftoverImages,
}

/// How a script recognises the commands it answers.
#[derive(Debug, Clone)]
pub enum Pattern {
    /// The command's script contains this text.
    Contains(String),
    /// The regular expression matches somewhere in the command's script.
    Regex(Regex),
}

impl Pattern {
    /// Whether `script` matches.
    #[must_use]
    pub fn matches(&self, script: &str) -> bool {
        match self {
            Self::Contains(text) => script.contains(text.as_str()),
            Self::Regex(regex) => regex.is_match(script),
        }
    }
}

/// How a scripted command ends besides its exit code.
#[derive(Debug)]
enum End {
    /// The command finished (or was killed) and the container still runs.
    Finished,
    /// The command stopped its container (exit code of the container).
    StopsContainer(i64),
    /// The engine fails the exec.
    Fails(RuntimeError),
}

/// What an exec answers: an outcome, a container stopped under the command, or an engine error.
#[derive(Debug)]
pub struct Answer {
    exit_code: i64,
    output: String,
    timed_out: bool,
    oom_killed: bool,
    duration: Duration,
    end: End,
    /// What the command does to the container's files, in order.
    effects: Vec<FileEffect>,
}

/// What a scripted command does to a file of its container.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileEffect {
    /// Writes this content to the absolute path.
    Write(String, Vec<u8>),
    /// Deletes the absolute path (and everything under it).
    Delete(String),
}

impl Clone for Answer {
    fn clone(&self) -> Self {
        Self {
            exit_code: self.exit_code,
            output: self.output.clone(),
            timed_out: self.timed_out,
            oom_killed: self.oom_killed,
            duration: self.duration,
            end: match &self.end {
                End::Finished => End::Finished,
                End::StopsContainer(code) => End::StopsContainer(*code),
                End::Fails(error) => End::Fails(clone_error(error)),
            },
            effects: self.effects.clone(),
        }
    }
}

impl Default for Answer {
    fn default() -> Self {
        Self::ok()
    }
}

impl Answer {
    /// Exit 0 with no output.
    #[must_use]
    pub fn ok() -> Self {
        Self::exit(0)
    }

    /// Exit `code` with no output.
    #[must_use]
    pub fn exit(code: i64) -> Self {
        Self {
            exit_code: code,
            output: String::new(),
            timed_out: false,
            oom_killed: false,
            duration: Duration::from_millis(10),
            end: End::Finished,
            effects: Vec::new(),
        }
    }

    /// Killed by its timeout: exit 137, `timed_out`, and a duration of the exec's timeout.
    #[must_use]
    pub fn timed_out() -> Self {
        Self {
            timed_out: true,
            ..Self::exit(137)
        }
    }

    /// Killed by the OOM killer: exit 137 and `oom_killed`.
    #[must_use]
    pub fn oom_killed() -> Self {
        Self {
            oom_killed: true,
            ..Self::exit(137)
        }
    }

    /// The command stops its container, which exits with `exit_code`: the exec returns
    /// [`RuntimeError::ContainerStopped`], and so does every later exec in that container.
    #[must_use]
    pub fn stops_container(exit_code: i64) -> Self {
        Self {
            end: End::StopsContainer(exit_code),
            ..Self::exit(exit_code)
        }
    }

    /// The engine fails the exec with `error`.
    #[must_use]
    pub fn engine_error(error: RuntimeError) -> Self {
        Self {
            end: End::Fails(error),
            ..Self::exit(-1)
        }
    }

    /// A pytest run (`-rA -v`, as kiln's Python plans run it) with these results: node ids
    /// and pytest's status words (`PASSED`, `FAILED`, `ERROR`, `SKIPPED`), each on its `-v`
    /// line and in the short test summary, then the totals line. The exit code is pytest's: 1
    /// when a test failed or erred, 5 when there were no tests, 0 otherwise.
    #[must_use]
    pub fn pytest(results: &[(&str, &str)]) -> Self {
        let mut out = String::from(
            "============================= test session starts ==============================\n",
        );
        out.push_str(&format!("collected {} items\n\n", results.len()));
        for (id, status) in results {
            out.push_str(&format!("{id} {status}\n"));
        }
        out.push_str(
            "\n=========================== short test summary info ============================\n",
        );
        for (id, status) in results {
            out.push_str(&format!("{status} {id}\n"));
        }
        let count = |status: &str| results.iter().filter(|(_, s)| *s == status).count();
        let totals: Vec<String> = [
            ("FAILED", "failed", "failed"),
            ("PASSED", "passed", "passed"),
            ("SKIPPED", "skipped", "skipped"),
            ("ERROR", "error", "errors"),
        ]
        .iter()
        .filter(|(status, ..)| count(status) > 0)
        .map(|(status, one, many)| {
            let n = count(status);
            format!("{n} {}", if n == 1 { one } else { many })
        })
        .collect();
        let exit_code = if results.is_empty() {
            out.push_str("============================ no tests ran in 0.01s =============================\n");
            5
        } else {
            out.push_str(&format!(
                "========== {} in 0.05s ==========\n",
                totals.join(", ")
            ));
            i64::from(count("FAILED") + count("ERROR") > 0)
        };
        Self::exit(exit_code).output(out)
    }

    /// The same answer with `output` as the command's combined output (streamed to the sink,
    /// and capped in the outcome as the exec asks).
    #[must_use]
    pub fn output(mut self, output: impl Into<String>) -> Self {
        self.output = output.into();
        self
    }

    /// The same answer with another exit code (a report whose exit code contradicts it).
    #[must_use]
    pub fn with_exit_code(mut self, exit_code: i64) -> Self {
        self.exit_code = exit_code;
        self
    }

    /// The same answer, and the command writes `content` to the absolute `path` of its
    /// container (what `changes`, `copy_out` and later commits see).
    #[must_use]
    pub fn writes(mut self, path: &str, content: impl Into<Vec<u8>>) -> Self {
        self.effects
            .push(FileEffect::Write(normalize(path), content.into()));
        self
    }

    /// The same answer, and the command deletes the absolute `path` (and what is under it).
    #[must_use]
    pub fn deletes(mut self, path: &str) -> Self {
        self.effects.push(FileEffect::Delete(normalize(path)));
        self
    }

    /// The same answer taking `duration` (a timed-out answer takes at least the exec's
    /// timeout).
    #[must_use]
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }
}

/// A copy of an engine error (errors are not `Clone`, answers and faults are reused).
fn clone_error(error: &RuntimeError) -> RuntimeError {
    match error {
        RuntimeError::Unreachable { endpoint, message } => RuntimeError::Unreachable {
            endpoint: endpoint.clone(),
            message: message.clone(),
        },
        RuntimeError::ImageNotFound(image) => RuntimeError::ImageNotFound(image.clone()),
        RuntimeError::Build { image, message } => RuntimeError::Build {
            image: image.clone(),
            message: message.clone(),
        },
        RuntimeError::ContainerStopped { command, exit_code } => RuntimeError::ContainerStopped {
            command: command.clone(),
            exit_code: *exit_code,
        },
        RuntimeError::DiskExceeded { command, bound } => RuntimeError::DiskExceeded {
            command: command.clone(),
            bound: bound.clone(),
        },
        RuntimeError::Refused { operation, message } => RuntimeError::Refused {
            operation: operation.clone(),
            message: message.clone(),
        },
        RuntimeError::Engine { operation, message } => RuntimeError::Engine {
            operation: operation.clone(),
            message: message.clone(),
        },
    }
}

/// A scripted answer for the commands that match a pattern.
#[derive(Debug, Clone)]
pub struct Script {
    pattern: Pattern,
    nth: Option<usize>,
    image: Option<String>,
    after: Option<Pattern>,
    answers: Vec<Answer>,
}

impl Script {
    /// Answers commands whose script contains `text`.
    #[must_use]
    pub fn contains(text: impl Into<String>) -> Self {
        Self::new(Pattern::Contains(text.into()))
    }

    /// Answers commands whose script matches the regular expression `regex`.
    ///
    /// # Errors
    /// When `regex` does not compile.
    pub fn regex(regex: &str) -> Result<Self, regex::Error> {
        Ok(Self::new(Pattern::Regex(Regex::new(regex)?)))
    }

    fn new(pattern: Pattern) -> Self {
        Self {
            pattern,
            nth: None,
            image: None,
            after: None,
            answers: Vec::new(),
        }
    }

    /// Answers only the `n`th (1-based) command this script matches; the others go on to the
    /// next scripts.
    #[must_use]
    pub fn nth(mut self, n: usize) -> Self {
        self.nth = Some(n);
        self
    }

    /// Answers only in containers created from `image`.
    #[must_use]
    pub fn in_image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// Answers only in containers where an earlier command's script contained `text` (a
    /// patch applied, a file written), run in the container itself or in one its image was
    /// committed from.
    #[must_use]
    pub fn after(mut self, text: impl Into<String>) -> Self {
        self.after = Some(Pattern::Contains(text.into()));
        self
    }

    /// Adds an answer. Answers are given in turn, one per command answered; the last one
    /// repeats. A script without answers answers exit 0 with no output.
    #[must_use]
    pub fn answer(mut self, answer: Answer) -> Self {
        self.answers.push(answer);
        self
    }

    /// Adds several answers, in turn (see [`Script::answer`]).
    #[must_use]
    pub fn answers(mut self, answers: impl IntoIterator<Item = Answer>) -> Self {
        self.answers.extend(answers);
        self
    }
}

/// A script and how often it has matched and answered.
#[derive(Debug)]
struct ScriptState {
    script: Script,
    matched: usize,
    answered: usize,
}

/// An injected engine failure.
#[derive(Debug)]
struct Fault {
    operation: Operation,
    /// 1-based call number of the operation.
    from: usize,
    /// Every call from `from` on, or only that one.
    sticky: bool,
    error: RuntimeError,
}

/// How an image came to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageOrigin {
    /// Put there by the test ([`ScriptedRuntime::add_image`]).
    Seeded,
    /// Built from a Dockerfile ([`ContainerRuntime::build_image`]).
    Built,
    /// Committed from a container.
    Committed(ContainerId),
    /// Pulled from a registry.
    Pulled,
    /// A further name of another image.
    Tagged(String),
    /// Imported from a root file system.
    Imported,
}

/// A tar archive copied into a container: the directory and the archive's bytes, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopiedIn {
    /// Directory it was extracted into.
    pub dir: String,
    /// The archive.
    pub tar: Vec<u8>,
}

/// An image the runtime holds.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its tag (`repo:tag`).
    pub tag: String,
    /// Its id (`sha256:...`).
    pub id: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Environment of every container made from it.
    pub env: Vec<(String, String)>,
    /// How it came to be.
    pub origin: ImageOrigin,
    /// Files it holds: the archives copied into the containers it was committed from.
    pub files: Vec<CopiedIn>,
    /// Its file system: every file's absolute path and content, as its containers left it.
    pub fs: BTreeMap<String, Vec<u8>>,
    /// The scripts that made it: those run in the containers it was committed from, after
    /// their image's own.
    pub history: Vec<String>,
    /// The id of the image its container was made from (committed images); empty otherwise.
    pub parent: String,
    /// When it was made, in the runtime's own count (later images count higher).
    pub created: i64,
    /// Bytes on disk, its parent's included: 1 MiB per image in its line.
    pub size: i64,
}

/// How one exec ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecResult {
    /// The command finished (or was killed by its timeout or the OOM killer).
    Exited {
        /// Its exit code.
        exit_code: i64,
        /// Killed by its timeout.
        timed_out: bool,
        /// Killed by the OOM killer.
        oom_killed: bool,
    },
    /// The command stopped its container, which exited with this code.
    StoppedContainer(i64),
    /// The engine failed the exec; the error's message.
    EngineError(String),
}

/// One exec, as the runtime received it.
#[derive(Debug, Clone)]
pub struct ExecRecord {
    /// The script.
    pub script: String,
    /// Extra environment of the command.
    pub env: Vec<(String, String)>,
    /// Working directory of the command.
    pub workdir: Option<String>,
    /// Its timeout.
    pub timeout: Duration,
    /// Bytes of output the caller keeps.
    pub output_cap: usize,
    /// How it ended.
    pub result: ExecResult,
}

impl ExecRecord {
    /// The value of the command's extra environment variable `name`.
    #[must_use]
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A container the runtime created, with everything done to it.
#[derive(Debug, Clone)]
pub struct Container {
    /// Its id.
    pub id: ContainerId,
    /// The spec it was created from.
    pub spec: ContainerSpec,
    /// The id of the image it was made from (the spec's image, resolved when it was created).
    pub image_id: String,
    /// Its labels: the spec's, plus [`LABEL_MANAGED`].
    pub labels: BTreeMap<String, String>,
    /// Its environment: the image's, then the spec's.
    pub env: Vec<(String, String)>,
    /// Files from its image.
    pub image_files: Vec<CopiedIn>,
    /// The scripts that made its image ([`Image::history`]).
    pub image_history: Vec<String>,
    /// Archives copied into it, in order.
    pub copied_in: Vec<CopiedIn>,
    /// Its image's file system ([`Image::fs`]).
    pub image_fs: BTreeMap<String, Vec<u8>>,
    /// Its file system now: the image's, then what was copied in and what commands wrote
    /// and deleted ([`Answer::writes`], [`Answer::deletes`]), in order.
    pub fs: BTreeMap<String, Vec<u8>>,
    /// Commands run in it, in order.
    pub execs: Vec<ExecRecord>,
    /// Tags it was committed to, in order.
    pub commits: Vec<String>,
    /// The container's exit code once a command stopped it.
    pub stopped: Option<i64>,
    /// Whether it was removed.
    pub removed: bool,
}

impl Container {
    /// The scripts run in it, in order.
    #[must_use]
    pub fn commands(&self) -> Vec<&str> {
        self.execs.iter().map(|e| e.script.as_str()).collect()
    }

    /// The contents of the file at absolute `path` as the copied archives and the commands
    /// left it.
    #[must_use]
    pub fn file(&self, path: &str) -> Option<Vec<u8>> {
        self.fs.get(&normalize(path)).cloned()
    }

    fn apply(&mut self, effect: &FileEffect) {
        match effect {
            FileEffect::Write(path, content) => {
                self.fs.insert(path.clone(), content.clone());
            }
            FileEffect::Delete(path) => {
                let under = format!("{}/", path.trim_end_matches('/'));
                self.fs
                    .retain(|name, _| name != path && !name.starts_with(&under));
            }
        }
    }
}

/// One call to the runtime, in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `ping`.
    Ping,
    /// `image_exists(image)` or `image_id(image)`.
    ImageExists(String),
    /// `list_images(label, value)`.
    ListImages(String, String),
    /// `list_containers`.
    ListContainers,
    /// `build_image` of this tag.
    BuildImage(String),
    /// `create` from this image; the id when it succeeded.
    Create {
        /// The spec's image.
        image: String,
        /// The new container, unless the call failed.
        id: Option<ContainerId>,
    },
    /// `exec` of this script.
    Exec {
        /// The container.
        container: ContainerId,
        /// The script.
        script: String,
    },
    /// `copy_in` of an archive.
    CopyIn {
        /// The container.
        container: ContainerId,
        /// The target directory.
        dir: String,
    },
    /// `copy_out` of a path.
    CopyOut {
        /// The container.
        container: ContainerId,
        /// The path.
        path: String,
    },
    /// `changes` of a container.
    Changes(ContainerId),
    /// `commit` of a container to a tag.
    Commit {
        /// The container.
        container: ContainerId,
        /// The tag.
        tag: String,
    },
    /// `remove` of a container.
    Remove(ContainerId),
    /// `remove_image` of a tag.
    RemoveImage(String),
    /// `remove_labelled(label, value)`.
    RemoveLabelled(String, String),
    /// `list_labelled(label, value)`.
    ListLabelled(String, String),
    /// `pull_image(image)`.
    PullImage(String),
    /// `tag_image(source, target)`.
    TagImage(String, String),
    /// `push_image(image)`.
    PushImage(String),
    /// `import_image(tag)`.
    ImportImage(String),
    /// `remove_leftover_images(label, value)`.
    RemoveLeftoverImages(String, String),
}

impl Call {
    /// The operation of the call.
    #[must_use]
    pub fn operation(&self) -> Operation {
        match self {
            Self::Ping => Operation::Ping,
            Self::ImageExists(_) => Operation::ImageExists,
            Self::ListImages(..) => Operation::ListImages,
            Self::ListContainers => Operation::ListContainers,
            Self::BuildImage(_) => Operation::BuildImage,
            Self::Create { .. } => Operation::Create,
            Self::Exec { .. } => Operation::Exec,
            Self::CopyIn { .. } => Operation::CopyIn,
            Self::CopyOut { .. } => Operation::CopyOut,
            Self::Changes(_) => Operation::Changes,
            Self::Commit { .. } => Operation::Commit,
            Self::Remove(_) => Operation::Remove,
            Self::RemoveImage(_) => Operation::RemoveImage,
            Self::RemoveLabelled(..) => Operation::RemoveLabelled,
            Self::ListLabelled(..) => Operation::ListLabelled,
            Self::PullImage(_) => Operation::PullImage,
            Self::TagImage(..) => Operation::TagImage,
            Self::PushImage(_) => Operation::PushImage,
            Self::ImportImage(_) => Operation::ImportImage,
            Self::RemoveLeftoverImages(..) => Operation::RemoveLeftoverImages,
        }
    }
}

/// Everything behind the runtime's lock.
#[derive(Debug, Default)]
struct State {
    scripts: Vec<ScriptState>,
    default: Answer,
    faults: Vec<Fault>,
    counts: BTreeMap<Operation, usize>,
    calls: Vec<Call>,
    images: BTreeMap<String, Image>,
    /// Images whose tag moved to another image (the engine's dangling images).
    dangling: Vec<Image>,
    builds: Vec<ImageBuild>,
    pushed: Vec<String>,
    /// Containers in creation order.
    containers: Vec<Container>,
    files: Vec<(String, Vec<u8>)>,
    unpullable: bool,
    next_id: usize,
    /// What `free_bytes` answers.
    free_bytes: Option<u64>,
}

impl State {
    /// Logs `call`, counts it, and returns the injected failure for it, if any.
    fn enter(&mut self, call: Call) -> Result<(), RuntimeError> {
        let operation = call.operation();
        self.calls.push(call);
        let count = self.counts.entry(operation).or_default();
        *count += 1;
        let count = *count;
        match self
            .faults
            .iter()
            .find(|f| f.operation == operation && (f.from == count || (f.sticky && count > f.from)))
        {
            Some(fault) => Err(clone_error(&fault.error)),
            None => Ok(()),
        }
    }

    fn container(&mut self, id: &ContainerId) -> Option<&mut Container> {
        self.containers
            .iter_mut()
            .find(|c| &c.id == id && !c.removed)
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}{:04}", self.next_id)
    }

    /// Puts `image` under its tag; an image the tag named before becomes dangling.
    /// The image `reference` names: a tag, or an image's id (`sha256:…`), tagged or left
    /// dangling by a tag that moved, as the engine resolves them.
    fn find_image(&self, reference: &str) -> Option<&Image> {
        self.images.get(reference).or_else(|| {
            self.images
                .values()
                .chain(&self.dangling)
                .find(|image| image.id == reference)
        })
    }

    fn put_image(&mut self, image: Image) {
        if let Some(old) = self.images.insert(image.tag.clone(), image)
            && !self.images.values().any(|i| i.id == old.id)
        {
            self.dangling.push(old);
        }
    }

    /// The images `keep` selects, once each, with the tags that still name them.
    fn image_infos(&self, keep: impl Fn(&Image) -> bool) -> Vec<ImageInfo> {
        let mut by_id: BTreeMap<String, ImageInfo> = BTreeMap::new();
        for image in self.images.values().chain(&self.dangling) {
            if !keep(image) {
                continue;
            }
            let info = by_id.entry(image.id.clone()).or_insert_with(|| ImageInfo {
                id: image.id.clone(),
                labels: image.labels.clone(),
                size: image.size,
                created: image.created,
                parent: image.parent.clone(),
                ..ImageInfo::default()
            });
            if self
                .images
                .get(&image.tag)
                .is_some_and(|i| i.id == image.id)
            {
                info.tags.push(image.tag.clone());
            }
        }
        by_id.into_values().collect()
    }

    fn new_image(&mut self, tag: &str, origin: ImageOrigin) -> Image {
        let id = format!("sha256:{}", self.fresh_id("scripted-image-"));
        Image {
            tag: tag.to_string(),
            id,
            labels: BTreeMap::new(),
            env: Vec::new(),
            origin,
            files: Vec::new(),
            fs: BTreeMap::new(),
            history: Vec::new(),
            parent: String::new(),
            created: self.next_id as i64,
            size: 1 << 20,
        }
    }
}

/// A [`ContainerRuntime`] that runs nothing: execs are answered from scripts, images and
/// containers are bookkeeping, and every call is logged. Share it as an
/// `Arc<ScriptedRuntime>` and hand a clone to the code under test as an
/// `Arc<dyn ContainerRuntime>`.
#[derive(Debug, Default)]
pub struct ScriptedRuntime {
    state: Mutex<State>,
}

impl ScriptedRuntime {
    /// A runtime with no images, no scripts, registries that have every image, and the default
    /// answer exit 0 with no output.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a script. Scripts are tried in the order added; the first that answers a command
    /// answers it.
    pub fn script(&self, script: Script) {
        self.state().scripts.push(ScriptState {
            script,
            matched: 0,
            answered: 0,
        });
    }

    /// Sets the answer for commands no script answers (by default exit 0, no output).
    pub fn set_default(&self, answer: Answer) {
        self.state().default = answer;
    }

    /// Adds an image, as if it had been built or pulled before.
    pub fn add_image(&self, tag: &str) {
        self.add_image_with(tag, BTreeMap::new(), Vec::new());
    }

    /// Adds an image with labels and environment.
    pub fn add_image_with(
        &self,
        tag: &str,
        labels: BTreeMap<String, String>,
        env: Vec<(String, String)>,
    ) {
        let mut state = self.state();
        let mut image = state.new_image(tag, ImageOrigin::Seeded);
        image.labels = labels;
        image.env = env;
        state.put_image(image);
    }

    /// Adds an image holding these files (absolute paths and contents), as if it had been
    /// committed from a container that wrote them.
    pub fn add_image_files(&self, tag: &str, files: &[(&str, &[u8])]) {
        let mut state = self.state();
        let mut image = state.new_image(tag, ImageOrigin::Seeded);
        image.fs = files
            .iter()
            .map(|(path, content)| (normalize(path), content.to_vec()))
            .collect();
        state.put_image(image);
    }

    /// Makes `free_bytes` answer this many bytes free under `/var/lib/docker` (`None`: unknown,
    /// the default).
    pub fn set_free_bytes(&self, free: Option<u64>) {
        self.state().free_bytes = free;
    }

    /// Makes registries have no image at all: pulls answer `Ok(false)`.
    pub fn set_unpullable(&self) {
        self.state().unpullable = true;
    }

    /// Makes `copy_out` of `path` (or of a directory above it) return this file, in every
    /// container.
    pub fn add_file(&self, path: &str, contents: impl Into<Vec<u8>>) {
        self.state().files.push((normalize(path), contents.into()));
    }

    /// Makes the `nth` (1-based) call of `operation` fail with `error`.
    pub fn fail(&self, operation: Operation, nth: usize, error: RuntimeError) {
        self.state().faults.push(Fault {
            operation,
            from: nth,
            sticky: false,
            error,
        });
    }

    /// Makes every call of `operation` from the `nth` (1-based) on fail with `error` (an
    /// engine that went away).
    pub fn fail_from(&self, operation: Operation, nth: usize, error: RuntimeError) {
        self.state().faults.push(Fault {
            operation,
            from: nth,
            sticky: true,
            error,
        });
    }

    /// Every call so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// How many calls of `operation` were made (failed ones included).
    #[must_use]
    pub fn count(&self, operation: Operation) -> usize {
        self.state()
            .counts
            .get(&operation)
            .copied()
            .unwrap_or_default()
    }

    /// Every container created, in creation order, removed ones included.
    #[must_use]
    pub fn containers(&self) -> Vec<Container> {
        self.state().containers.clone()
    }

    /// The container with this id.
    #[must_use]
    pub fn container(&self, id: &ContainerId) -> Option<Container> {
        self.state()
            .containers
            .iter()
            .find(|c| &c.id == id)
            .cloned()
    }

    /// Every script exec'd, in order, across containers.
    #[must_use]
    pub fn commands(&self) -> Vec<String> {
        self.state()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Exec { script, .. } => Some(script.clone()),
                _ => None,
            })
            .collect()
    }

    /// The containers not removed.
    #[must_use]
    pub fn live_containers(&self) -> Vec<ContainerId> {
        self.state()
            .containers
            .iter()
            .filter(|c| !c.removed)
            .map(|c| c.id.clone())
            .collect()
    }

    /// The image under `tag`.
    #[must_use]
    pub fn image(&self, tag: &str) -> Option<Image> {
        self.state().images.get(tag).cloned()
    }

    /// The tags of every image, sorted.
    #[must_use]
    pub fn image_tags(&self) -> Vec<String> {
        self.state().images.keys().cloned().collect()
    }

    /// Every image build asked for, in order.
    #[must_use]
    pub fn builds(&self) -> Vec<ImageBuild> {
        self.state().builds.clone()
    }

    /// The tar archive of `path` in container `id` as the engine gives it (entries named from
    /// the last component of `path` on), from the container's files and the scripted ones over
    /// them; `None` when nothing is there.
    fn archive(&self, id: &ContainerId, path: &str) -> Result<Option<Vec<u8>>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::CopyOut {
            container: id.clone(),
            path: path.to_string(),
        })?;
        let operation = format!("copy {path} out of {}", id.0);
        let wanted = normalize(path);
        let scripted: Vec<(String, Vec<u8>)> = state.files.clone();
        let container = state
            .container(id)
            .ok_or_else(|| RuntimeError::engine(&operation, "no such container"))?;
        let mut files = container.fs.clone();
        files.extend(scripted);
        let under = format!("{}/", wanted.trim_end_matches('/'));
        let selected: Vec<(&String, &Vec<u8>)> = files
            .iter()
            .filter(|(name, _)| **name == wanted || name.starts_with(&under))
            .collect();
        if selected.is_empty() {
            return Ok(None);
        }
        let parent = match wanted.rsplit_once('/') {
            Some((parent, _)) => format!("{parent}/"),
            None => String::new(),
        };
        let mut builder = tar::Builder::new(Vec::new());
        for (name, contents) in selected {
            let mut header = tar::Header::new_gnu();
            header.set_size(contents.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            header.set_cksum();
            let relative = name.strip_prefix(&parent).unwrap_or(name);
            builder
                .append_data(&mut header, relative, contents.as_slice())
                .map_err(|e| RuntimeError::engine(&operation, e))?;
        }
        builder
            .into_inner()
            .map(Some)
            .map_err(|e| RuntimeError::engine(operation, e))
    }

    /// Every image pushed, in order.
    #[must_use]
    pub fn pushed(&self) -> Vec<String> {
        self.state().pushed.clone()
    }
}

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
        Ok(state.find_image(image).is_some())
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
        Ok(state.find_image(image).map(|i| i.id.clone()))
    }

    async fn list_images(&self, label: &str, value: &str) -> Result<Vec<ImageInfo>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListImages(label.to_string(), value.to_string()))?;
        Ok(state.image_infos(|image| {
            matches!(image.labels.get(label), Some(found) if value.is_empty() || found == value)
        }))
    }

    async fn list_all_images(&self) -> Result<Option<Vec<ImageInfo>>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::ListImages(String::new(), String::new()))?;
        Ok(Some(state.image_infos(|_| true)))
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
            state.put_image(image);
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
        let Some(image) = state.find_image(&spec.image).cloned() else {
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
        });
        Ok(id)
    }

    async fn exec(
        &self,
        id: &ContainerId,
        exec: &ExecSpec,
        on_output: OutputSink<'_>,
    ) -> Result<ExecOutcome, RuntimeError> {
        let answer = {
            let mut state = self.state();
            let entered = state.enter(Call::Exec {
                container: id.clone(),
                script: exec.script.clone(),
            });
            let State {
                scripts,
                default,
                containers,
                ..
            } = &mut *state;
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
            let answer =
                choose(scripts, container, &exec.script).unwrap_or_else(|| default.clone());
            for effect in &answer.effects {
                container.apply(effect);
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
            answer
        };
        // The sink is the caller's code: it runs without the lock held.
        if !answer.output.is_empty() {
            on_output(answer.output.as_bytes());
        }
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

    async fn changes(&self, id: &ContainerId) -> Result<Vec<FsChange>, RuntimeError> {
        let mut state = self.state();
        state.enter(Call::Changes(id.clone()))?;
        let container = state.container(id).ok_or_else(|| {
            RuntimeError::engine(format!("list the changes of {}", id.0), "no such container")
        })?;
        let mut changes = Vec::new();
        for (path, content) in &container.fs {
            match container.image_fs.get(path) {
                None => changes.push(FsChange {
                    path: path.clone(),
                    kind: ChangeKind::Added,
                }),
                Some(old) if old != content => changes.push(FsChange {
                    path: path.clone(),
                    kind: ChangeKind::Modified,
                }),
                Some(_) => {}
            }
        }
        for path in container.image_fs.keys() {
            if !container.fs.contains_key(path) {
                changes.push(FsChange {
                    path: path.clone(),
                    kind: ChangeKind::Deleted,
                });
            }
        }
        Ok(changes)
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
        if let Some(parent) = state.find_image(&from) {
            image.parent.clone_from(&parent.id);
            image.size += parent.size;
        }
        let image_id = image.id.clone();
        state.put_image(image);
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
            if state.images.contains_key(image) {
                true
            } else if state.unpullable {
                false
            } else {
                let pulled = state.new_image(image, ImageOrigin::Pulled);
                state.put_image(pulled);
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
        let Some(image) = state.images.get(source).cloned() else {
            return Err(RuntimeError::ImageNotFound(source.to_string()));
        };
        state.put_image(Image {
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
            let Some(found) = state.images.get(image) else {
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
        state.put_image(image);
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
        let labelled = |image: &Image| image.labels.get(label).map(String::as_str) == Some(value);
        let dangling_before = state.dangling.len();
        state.dangling.retain(|image| !labelled(image));
        let mut removed = dangling_before - state.dangling.len();
        let scratch: Vec<String> = state
            .images
            .values()
            .filter(|image| labelled(image) && image.labels.contains_key(LABEL_SCRATCH))
            .map(|image| image.tag.clone())
            .collect();
        for tag in scratch {
            state.images.remove(&tag);
            removed += 1;
        }
        Ok(removed)
    }
}

/// The answer of the first script that answers `script` in `container`, counting matches.
fn choose(scripts: &mut [ScriptState], container: &Container, script: &str) -> Option<Answer> {
    for state in scripts {
        let rule = &state.script;
        if !rule.pattern.matches(script)
            || rule
                .image
                .as_ref()
                .is_some_and(|image| *image != container.spec.image)
            || rule.after.as_ref().is_some_and(|after| {
                !container.execs.iter().any(|e| after.matches(&e.script))
                    && !container.image_history.iter().any(|h| after.matches(h))
            })
        {
            continue;
        }
        state.matched += 1;
        if rule.nth.is_some_and(|n| n != state.matched) {
            continue;
        }
        let answer = rule
            .answers
            .get(state.answered)
            .or(rule.answers.last())
            .cloned()
            .unwrap_or_default();
        state.answered += 1;
        return Some(answer);
    }
    None
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

/// `path` as an absolute path without `.` components or a trailing slash.
fn normalize(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

/// The regular files of a copied archive, by absolute path. An archive that cannot be read
/// yields what could be read before the damage.
fn tar_files(copied: &CopiedIn) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut archive = tar::Archive::new(copied.tar.as_slice());
    let Ok(entries) = archive.entries() else {
        return files;
    };
    for entry in entries {
        let Ok(mut entry) = entry else { break };
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let Ok(name) = entry.path().map(|p| p.to_string_lossy().into_owned()) else {
            continue;
        };
        let mut contents = Vec::new();
        if entry.read_to_end(&mut contents).is_err() {
            break;
        }
        files.push((normalize(&format!("{}/{name}", copied.dir)), contents));
    }
    files
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

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
