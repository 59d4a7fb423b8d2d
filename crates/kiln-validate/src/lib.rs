//! The validate stage: which tests the gold patch fixes, measured on fresh containers.
//!
//! Each instance is run on both sides, `before` (base + test patch) and `after` (base + test
//! patch + gold patch), each side `repeats` times, every run in a fresh container from the
//! launch image with the network off by default. The rules of [`decide`] then give
//! FAIL_TO_PASS, PASS_TO_PASS, flaky tests and the reasons for rejection.

pub mod agreement;
pub mod decide;
pub mod evaluate;
pub mod gold;
pub mod harbor;
pub mod harness;
pub mod quality;
pub mod run;
pub mod whole;

/// How validation applies a patch (the chain is kiln-core's: the host applies it too).
pub use kiln_core::apply as patch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kiln_core::config::{DockerSettings, ValidateSettings};
use kiln_core::{ContainerRuntime, CpuLedger, CpuPhase, Event, Removals, Reporter, RuntimeError};
use kiln_schema::{
    Candidate, EnvironmentRecord, FailureClass, TestStatus, ValidationRecord, ValidationStatus,
};

pub use decide::{Decision, RunResult, Side, decide};
pub use evaluate::{EvaluateRequest, Evaluation, Resolution, evaluate};
pub use run::{RunFailure, RunOutput, RunSpec, have_or_pull, run_tests};

/// Everything validation needs for one instance.
#[derive(Debug, Clone)]
pub struct ValidateRequest {
    /// The candidate (patches).
    pub candidate: Candidate,
    /// Its built environment.
    pub environment: EnvironmentRecord,
    /// Directory for this instance's validation logs.
    pub log_dir: PathBuf,
    /// Log directory as recorded in the row.
    pub log_dir_label: String,
    /// Labels for the containers.
    pub labels: BTreeMap<String, String>,
    /// Stage settings.
    pub settings: ValidateSettings,
    /// Container limits.
    pub docker: DockerSettings,
    /// Stage name, for progress events.
    pub stage: String,
    /// Where the repository's history is: the patches are applied on the host first, to judge
    /// the gold patch by what it changes and to know what every run must hold.
    pub source: gold::Source,
}

/// An infrastructure failure that stops the stage; it is never written as a row.
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// The engine went away or failed.
    #[error(transparent)]
    Engine(#[from] RuntimeError),
}

/// Validates one instance: the gold patch judged by its effect, then each side built once (its
/// patches applied and its rebuild commands run in a container committed as the side's image)
/// and its tests run `repeats` times, each in a fresh container from that image, the sides
/// interleaved; the runs decide.
///
/// # Errors
/// [`ValidateError::Engine`] when the engine cannot be reached or fails; every failure of the
/// instance is a row.
pub async fn validate(
    runtime: Arc<dyn ContainerRuntime>,
    request: &ValidateRequest,
    reporter: &dyn Reporter,
) -> Result<ValidationRecord, ValidateError> {
    let cpu = CpuLedger::new();
    let mut record = validate_charged(runtime, request, reporter, &cpu).await?;
    record.cpu_build_seconds = cpu.seconds(CpuPhase::ValidationBuild);
    record.cpu_test_seconds = cpu.seconds(CpuPhase::ValidationTests);
    Ok(record)
}

/// [`validate`], the containers' CPU time charged to `cpu`.
async fn validate_charged(
    runtime: Arc<dyn ContainerRuntime>,
    request: &ValidateRequest,
    reporter: &dyn Reporter,
    cpu: &CpuLedger,
) -> Result<ValidationRecord, ValidateError> {
    let started = Instant::now();
    let mut record = new_record(request);
    let ended = |mut record: ValidationRecord, class: FailureClass, reason: String| {
        record.status = if matches!(
            class,
            FailureClass::GoldEditsTests | FailureClass::GoldWithoutCode
        ) {
            ValidationStatus::Rejected
        } else {
            ValidationStatus::Failed
        };
        record.failure_class = Some(class);
        record.reason = Some(reason);
        record.total_seconds = started.elapsed().as_secs_f64();
        record
    };
    let env = &request.environment;
    let Some(tag) = env.image.clone() else {
        return Ok(ended(
            record,
            FailureClass::Infra,
            "the environment has no image".into(),
        ));
    };
    // The image launch committed, by its id: a tag another dataset of the same name (or a
    // later launch) moved cannot change what runs here.
    let image = env.image_digest.clone().unwrap_or_else(|| tag.clone());
    // A gold patch that edits the tests judging it proves nothing, whatever the runs say. It is
    // judged by what it changes, applied on the host to the base commit.
    let effect = match examine(request).await? {
        Ok(effect) => effect,
        Err((class, reason)) => return Ok(ended(record, class, reason)),
    };
    if !run::have_or_pull(runtime.as_ref(), &image, &tag).await? {
        let reason = gone(env, &image, &tag);
        return Ok(ended(record, FailureClass::Infra, reason));
    }
    let sides = Sides {
        request,
        reporter,
        runtime: &runtime,
        effect: &effect,
        image: &image,
        tag: &tag,
        cpu,
        removals: Removals::default(),
    };
    let mut built = Vec::new();
    let outcome = sides.run(&mut record, &mut built).await;
    // The sides' images go whatever happened, once the containers made from them are gone
    // (an engine refuses, or on Podman fails, to remove an image a container being removed
    // still uses). A removal that fails, like a kill before, leaves the image to the dataset's
    // cleanup of scratch images.
    for failed in sides.removals.wait().await {
        reporter.report(Event::Note {
            message: format!("{}: {failed}", env.instance_id),
        });
    }
    for build in &built {
        if let Err(e) = runtime.remove_image(&build.tag).await {
            reporter.report(Event::Note {
                message: format!("{}: {e}", env.instance_id),
            });
        }
    }
    let runs = match outcome? {
        Ok(runs) => runs,
        Err((class, reason)) => return Ok(ended(record, class, reason)),
    };
    decide_and_record(&mut record, runs, request, &effect.test_sources);
    record.total_seconds = started.elapsed().as_secs_f64();
    Ok(record)
}

/// The row before any run: failed, with nothing decided but what the texts show.
fn new_record(request: &ValidateRequest) -> ValidationRecord {
    let env = &request.environment;
    let candidate = &request.candidate;
    // The texts alone say whether they show the fix: every row carries it, whatever the runs.
    let leak = quality::solution_leak(
        &candidate.patch,
        &[&candidate.problem_statement, &candidate.hints_text],
    );
    ValidationRecord {
        instance_id: env.instance_id.clone(),
        status: ValidationStatus::Failed,
        failure_class: None,
        reason: None,
        FAIL_TO_PASS: Vec::new(),
        PASS_TO_PASS: Vec::new(),
        fail_to_pass_classes: BTreeMap::new(),
        flaky: BTreeMap::new(),
        pass_to_fail: Vec::new(),
        agreement: None,
        agreement_by_meaning: None,
        given_missing: Vec::new(),
        given_extra: Vec::new(),
        pass_to_pass_agreement: None,
        log_parser: None,
        log_parser_reason: None,
        harness_unread: Vec::new(),
        needs_network: Vec::new(),
        repeats: i64::try_from(repeats(request)).unwrap_or(1),
        identical_runs_before: 0,
        identical_runs_after: 0,
        solution_leak: leak.leak,
        solution_leak_matches: leak.matches,
        difficulty: None,
        difficulty_measures: BTreeMap::new(),
        tests_defined: 0,
        tests_collected: None,
        tests_not_collected: Vec::new(),
        whole_suite: None,
        broken_outside_scope: Vec::new(),
        network: request.settings.tests.for_repo(&env.repo).as_str().into(),
        runs: BTreeMap::new(),
        run_statuses: BTreeMap::new(),
        test_seconds: 0.0,
        total_seconds: 0.0,
        cpu_build_seconds: 0.0,
        cpu_test_seconds: 0.0,
        log_dir: request.log_dir_label.clone(),
    }
}

/// Runs per side.
fn repeats(request: &ValidateRequest) -> usize {
    usize::try_from(request.settings.repeats)
        .unwrap_or(1)
        .max(1)
}

/// Applies the patches on the host and judges the gold patch ([`gold::examine`]), off the async
/// workers.
async fn examine(
    request: &ValidateRequest,
) -> Result<Result<gold::Effect, (FailureClass, String)>, ValidateError> {
    let (source, candidate, language) = (
        request.source.clone(),
        request.candidate.clone(),
        request.environment.language.clone(),
    );
    tokio::task::spawn_blocking(move || {
        gold::examine(
            &source,
            &candidate.repo,
            &candidate.base_commit,
            &candidate.test_patch,
            &candidate.patch,
            &language,
        )
    })
    .await
    .map_err(|e| ValidateError::Engine(RuntimeError::engine("examine the gold patch", e)))
}

/// Why an environment image that is gone cannot be validated, and what to do.
fn gone(env: &EnvironmentRecord, image: &str, tag: &str) -> String {
    format!(
        "the environment image {} is gone from the engine (and from its registry, if it names \
         one){}; launch the instance again (kiln stage <launch> --only {} --force)",
        tag,
        if image == tag {
            String::new()
        } else {
            format!(" (launch committed it as {image})")
        },
        env.instance_id
    )
}

/// How the SWE-bench harness's parsers read one run: its side, its exit code and each parser's
/// statuses.
type HarnessView = (
    Side,
    i64,
    Vec<(&'static str, kiln_testlog::swebench::HarnessStatuses)>,
);

/// What the runs of an instance gathered.
#[derive(Default)]
struct Runs {
    results: Vec<RunResult>,
    harness: Vec<HarnessView>,
    /// Tests that failed for want of a network in some run.
    offline: BTreeSet<String>,
    /// The repeats were not run: after the first run of each side no test could become
    /// FAIL_TO_PASS ([`decide::may_fail_to_pass`]).
    stopped_after_first: bool,
    /// The sampled whole-suite check, when this row had one.
    whole: Option<whole::WholeSuite>,
    /// The runner's listing of the tests the test patch's files define, in the `after` build.
    listing: Option<quality::Listing>,
}

/// One side's build: its image, or why it did not build (the `before` side only: its new
/// tests are then absent before the fix).
struct Built {
    side: Side,
    /// The build, when it built.
    build: Option<run::SideBuild>,
    /// Why it did not build.
    failed: Option<String>,
    /// The tag its image was committed to.
    tag: String,
}

/// What the runs of one instance share.
struct Sides<'a> {
    request: &'a ValidateRequest,
    reporter: &'a dyn Reporter,
    runtime: &'a Arc<dyn ContainerRuntime>,
    effect: &'a gold::Effect,
    /// The environment image (by id).
    image: &'a str,
    /// Its tag, which the sides' tags are made from.
    tag: &'a str,
    /// Where the runs' CPU time is charged.
    cpu: &'a CpuLedger,
    /// The runs' container removals, in the background while later runs go on; waited for
    /// before the sides' images are removed.
    removals: Removals,
}

impl Sides<'_> {
    /// The sides in order: `base` (with `base_run`), `before`, `after`.
    fn sides(&self) -> Vec<Side> {
        let base = self.request.settings.base_run.then_some(Side::Base);
        base.into_iter()
            .chain([Side::Before, Side::After])
            .collect()
    }

    /// Builds every side once, then runs their tests `repeats` times, the sides interleaved so
    /// that a slow drift of the machine affects both equally; `Ok(Err(..))` is the row's
    /// failure. When the first run of each side leaves no test that could become FAIL_TO_PASS
    /// (none fails before and passes after), the repeats are not run: they can only confirm
    /// a rejection. The sides built are pushed to `built`, for the caller to remove.
    async fn run(
        &self,
        record: &mut ValidationRecord,
        built: &mut Vec<Built>,
    ) -> Result<Result<Runs, (FailureClass, String)>, ValidateError> {
        for side in self.sides() {
            match self.build(side).await? {
                Ok(done) => built.push(done),
                Err(failure) => return Ok(Err(failure)),
            }
        }
        let repeats = repeats(self.request);
        let mut runs = Runs::default();
        for repeat in 1..=repeats {
            for side in built.iter() {
                // The base run is a single one: what the repository does before any patch.
                if side.side == Side::Base && repeat > 1 {
                    continue;
                }
                if let Err(failure) = self.test(side, repeat, record, &mut runs).await? {
                    return Ok(Err(failure));
                }
            }
            if repeat == 1 && repeats > 1 && !decide::may_fail_to_pass(&runs.results) {
                runs.stopped_after_first = true;
                break;
            }
        }
        runs.whole = self.whole_suite(built, &runs).await?;
        runs.listing = self.listing(built, &runs).await?;
        Ok(Ok(runs))
    }

    /// The runner's listing of the tests the test patch's files define
    /// ([`quality::Listing`]), from the environment's `collect_command` in the `after` side's
    /// build, for a row the runs may validate; `None` without such a command, or when its
    /// output is no listing (the count is then read from the files' text).
    async fn listing(
        &self,
        built: &[Built],
        runs: &Runs,
    ) -> Result<Option<quality::Listing>, ValidateError> {
        let env = &self.request.environment;
        let files: Vec<String> = self
            .effect
            .test_sources
            .iter()
            .filter(|(path, _)| quality::counted(&env.language, &env.parser, path))
            .map(|(path, _)| harness::quote(path))
            .collect();
        let (Some(collect), Some(build)) = (
            env.collect_command.as_deref(),
            built
                .iter()
                .find(|b| b.side == Side::After)
                .and_then(|b| b.build.as_ref()),
        ) else {
            return Ok(None);
        };
        if files.is_empty() || runs.stopped_after_first || decide(&runs.results).rejection.is_some()
        {
            return Ok(None);
        }
        self.step("after: list the test patch's tests".into());
        let command = format!("{collect} {}", files.join(" "));
        let mut spec = self.spec(Side::After, "after-listing");
        spec.test_command = &command;
        match run::command_run(Arc::clone(self.runtime), &spec, build).await {
            Ok(outcome) => Ok(quality::Listing::from_pytest(&outcome.output)),
            Err(RunFailure::Engine(e)) => Err(ValidateError::Engine(e)),
            Err(RunFailure::Item(..)) => Ok(None),
        }
    }

    /// The sampled whole-suite check ([`whole`]) of a row the runs validate, where launch
    /// narrowed the tests: the whole suite's command once in each side's build. A run that
    /// gives no statuses (a timeout) is said in the row, never the row's failure.
    async fn whole_suite(
        &self,
        built: &[Built],
        runs: &Runs,
    ) -> Result<Option<whole::WholeSuite>, ValidateError> {
        let env = &self.request.environment;
        let Some(command) = env.whole_test_command.as_deref() else {
            return Ok(None);
        };
        if !whole::sampled(
            env.instance_id.as_str(),
            self.request.settings.full_suite_every,
        ) || runs.stopped_after_first
            || decide(&runs.results).rejection.is_some()
        {
            return Ok(None);
        }
        let mut sides = Vec::new();
        for side in [Side::Before, Side::After] {
            let Some(build) = built
                .iter()
                .find(|b| b.side == side)
                .and_then(|b| b.build.as_ref())
            else {
                sides.push(whole::SideRun::Missing("did not build".into()));
                continue;
            };
            self.step(format!("{} whole suite", side.as_str()));
            let mut spec = self.spec(side, &format!("{}-whole", side.as_str()));
            spec.test_command = command;
            spec.harness_view = false;
            sides.push(
                match run::test_run(Arc::clone(self.runtime), &spec, build).await {
                    Ok(output) => whole::SideRun::Ran(output.statuses),
                    Err(RunFailure::Engine(e)) => return Err(ValidateError::Engine(e)),
                    Err(RunFailure::Item(class, reason)) => {
                        whole::SideRun::Missing(format!("{}: {reason}", class.as_str()))
                    }
                },
            );
        }
        let after = sides
            .pop()
            .unwrap_or(whole::SideRun::Missing(String::new()));
        let before = sides
            .pop()
            .unwrap_or(whole::SideRun::Missing(String::new()));
        Ok(Some(whole::WholeSuite { before, after }))
    }

    /// The spec of a run of `side` (its log named by `label`).
    fn spec(&self, side: Side, label: &str) -> RunSpec<'_> {
        let request = self.request;
        let env = &request.environment;
        let patches = patches_of(side, &request.candidate);
        let expected = gold::side(self.effect, &patches);
        RunSpec {
            image: self.image,
            patches,
            rebuild: &env.rebuild_commands,
            test_command: &env.test_command,
            parser: &env.parser,
            parser_script: env.parser_script.as_deref(),
            docker: &request.docker,
            network: request.settings.tests.for_repo(&env.repo),
            timeout: request.settings.test_timeout,
            log: request.log_dir.join(format!("{label}.log")),
            labels: &request.labels,
            removals: Some(&self.removals),
            harness_view: true,
            expected: Some(kiln_core::checkout::Expected {
                tree: &expected.tree,
                patched: &expected.patched,
                language: &env.language,
            }),
            cpu: Some(self.cpu),
        }
    }

    fn step(&self, text: String) {
        self.reporter.report(Event::ItemStep {
            stage: self.request.stage.clone(),
            item: self.request.environment.instance_id.to_string(),
            step: text,
        });
    }

    /// Builds `side` once: its patches and rebuild commands in a fresh container, committed as
    /// the side's image. New tests often use API the gold patch adds, so the test patch alone
    /// does not compile: the `before` side may fail to build (its tests are then absent, n2p,
    /// as in Multi-SWE-bench); any other failure is the row's.
    async fn build(
        &self,
        side: Side,
    ) -> Result<Result<Built, (FailureClass, String)>, ValidateError> {
        self.step(format!("{} build", side.as_str()));
        let tag = side_tag(self.tag, side);
        let mut labels = self.request.labels.clone();
        labels.insert(
            kiln_core::runtime::LABEL_SCRATCH.to_string(),
            "1".to_string(),
        );
        let spec = self.spec(side, &format!("{}-build", side.as_str()));
        match run::build_side(Arc::clone(self.runtime), &spec, &tag, &labels).await {
            Ok(build) => Ok(Ok(Built {
                side,
                build: Some(build),
                failed: None,
                tag,
            })),
            Err(RunFailure::Engine(e)) => Err(ValidateError::Engine(e)),
            Err(RunFailure::Item(FailureClass::Build, reason)) if side == Side::Before => {
                Ok(Ok(Built {
                    side,
                    build: None,
                    failed: Some(reason),
                    tag,
                }))
            }
            Err(RunFailure::Item(class, reason)) => {
                Ok(Err((class, format!("{} run 1: {reason}", side.as_str()))))
            }
        }
    }

    /// Runs `side`'s tests once (its `repeat`th run) and adds the run to the row and `runs`.
    async fn test(
        &self,
        built: &Built,
        repeat: usize,
        record: &mut ValidationRecord,
        runs: &mut Runs,
    ) -> Result<Result<(), (FailureClass, String)>, ValidateError> {
        let side = built.side;
        let repeats = repeats(self.request);
        self.step(format!("{} run {repeat}/{repeats}", side.as_str()));
        let Some(build) = &built.build else {
            let result = RunResult {
                side,
                repeat,
                exit_code: 0,
                statuses: kiln_schema::TestStatuses::new(),
                parse_problems: Vec::new(),
            };
            let reason = built.failed.as_deref().unwrap_or_default();
            record.runs.insert(
                result.label(),
                BTreeMap::from([("build".to_string(), format!("failed: {reason}"))]),
            );
            record
                .run_statuses
                .insert(result.label(), result.statuses.clone());
            runs.results.push(result);
            return Ok(Ok(()));
        };
        let spec = self.spec(side, &format!("{}-{repeat}", side.as_str()));
        let output = match run::test_run(Arc::clone(self.runtime), &spec, build).await {
            Ok(output) => output,
            // The engine's failure is no result: the stage stops and a re-run retries.
            Err(RunFailure::Engine(e)) => return Err(ValidateError::Engine(e)),
            Err(RunFailure::Item(class, reason)) => {
                return Ok(Err((
                    class,
                    format!("{} run {repeat}: {reason}", side.as_str()),
                )));
            }
        };
        let result = RunResult {
            side,
            repeat,
            exit_code: output.exit_code,
            statuses: output.statuses.clone(),
            parse_problems: output.parse_problems.clone(),
        };
        record.test_seconds += output.test_seconds;
        runs.offline.extend(output.offline.iter().cloned());
        record.runs.insert(result.label(), run_summary(&output));
        record.run_statuses.insert(result.label(), output.statuses);
        runs.harness.push((side, output.exit_code, output.harness));
        runs.results.push(result);
        Ok(Ok(()))
    }
}

/// The tag of a side's image: the environment's tag with the side after it.
fn side_tag(tag: &str, side: Side) -> String {
    let name_end = tag.rfind('/').map_or(0, |slash| slash + 1);
    let suffix = format!("validate-{}", side.as_str());
    match tag[name_end..].rfind(':') {
        Some(colon) => {
            let at = name_end + colon + 1;
            let (repo, version) = (&tag[..at], &tag[at..]);
            // A Docker tag holds at most 128 characters.
            let keep = version.len().min(127 - suffix.len());
            let cut = (0..=keep)
                .rev()
                .find(|i| version.is_char_boundary(*i))
                .unwrap_or(0);
            format!("{repo}{}.{suffix}", &version[..cut])
        }
        None => format!("{tag}:{suffix}"),
    }
}

/// What the runs with the gold patch reported of the tests the test patch's files define
/// ([`quality::tests_collected`]). The tests the environment's command leaves out for want of
/// a network are accounted for: the row names them (`needs_network`), and no run could report
/// them; so are the modules it leaves out whole (their id is the file's).
fn collected(
    runs: &Runs,
    request: &ValidateRequest,
    test_sources: &[(String, Vec<u8>)],
) -> Option<quality::Collected> {
    let left_out = &request.environment.tests_left_out;
    let test_sources: Vec<(String, Vec<u8>)> = test_sources
        .iter()
        .filter(|(path, _)| !left_out.contains(path))
        .cloned()
        .collect();
    quality::tests_collected(
        &request.environment.language,
        &request.environment.parser,
        &test_sources,
        runs.listing.as_ref(),
        runs.results
            .iter()
            .filter(|r| r.side == Side::After)
            .flat_map(|r| r.statuses.keys().map(String::as_str))
            .chain(left_out.iter().map(String::as_str)),
    )
}

/// Decides the instance from its runs and writes the decision into the row: how many runs of
/// each side repeated its first run's statuses, FAIL_TO_PASS, PASS_TO_PASS (and, validated,
/// the difficulty band), flaky tests, the tests that needed a network, the agreement with the
/// published lists, and the SWE-bench harness parser that reads the runs as kiln did.
fn decide_and_record(
    record: &mut ValidationRecord,
    runs: Runs,
    request: &ValidateRequest,
    test_sources: &[(String, Vec<u8>)],
) {
    let runs_stopped = runs.stopped_after_first;
    let identical = |side| i64::try_from(quality::identical_runs(&runs.results, side)).unwrap_or(0);
    record.identical_runs_before = identical(Side::Before);
    record.identical_runs_after = identical(Side::After);
    let collected = collected(&runs, request, test_sources);
    if let Some(collected) = &collected {
        record.tests_defined = i64::try_from(collected.defined).unwrap_or(i64::MAX);
        record.tests_collected = Some(collected.share());
        record.tests_not_collected.clone_from(&collected.missing);
    }
    let mut decision = decide(&runs.results);
    if decision.rejection.is_none()
        && let Some(collected) = &collected
        && collected.share() < request.settings.min_collected
    {
        decision.rejection = Some((
            FailureClass::TestsNotCollected,
            format!(
                "the runs with the gold patch reported {} of the {} tests the test patch's files \
                 define ({:.0} %, under min_collected {:.0} %); not reported: {}",
                collected.reported,
                collected.defined,
                collected.share() * 100.0,
                request.settings.min_collected * 100.0,
                decide::preview(&collected.missing)
            ),
        ));
    }
    // A test that failed for want of a network in some run and is in neither list says
    // nothing about the patch; the row names it, and those the environment's test command
    // leaves out for that reason, which no run reported.
    if let Some(check) = &runs.whole {
        // Outside the scope: what no narrowed run reported, nor the command left out.
        let scope: BTreeSet<&str> = runs
            .results
            .iter()
            .flat_map(|r| r.statuses.keys().map(String::as_str))
            .chain(
                request
                    .environment
                    .tests_left_out
                    .iter()
                    .map(String::as_str),
            )
            .collect();
        record.whole_suite = Some(check.summary());
        record.broken_outside_scope = check.broken_outside(&scope);
    }
    let mut offline = runs.offline;
    offline.extend(request.environment.tests_left_out.iter().cloned());
    record.needs_network = offline
        .into_iter()
        .filter(|t| {
            decision.fail_to_pass.binary_search(t).is_err()
                && decision.pass_to_pass.binary_search(t).is_err()
        })
        .collect();
    record.FAIL_TO_PASS = decision.fail_to_pass;
    record.PASS_TO_PASS = decision.pass_to_pass;
    record.fail_to_pass_classes = decision.classes;
    record.flaky = decision.flaky;
    record.pass_to_fail = decision.pass_to_fail;
    let candidate = &request.candidate;
    if let Some(agreement) = agreement::compare(&candidate.given_fail_to_pass, &record.FAIL_TO_PASS)
    {
        record.agreement = Some(agreement.exact);
        record.agreement_by_meaning = Some(agreement.by_meaning);
        record.given_missing = agreement.missing;
        record.given_extra = agreement.extra;
    }
    record.pass_to_pass_agreement =
        agreement::compare(&candidate.given_pass_to_pass, &record.PASS_TO_PASS)
            .map(|a| a.by_meaning);
    match decision.rejection {
        None => {
            record.status = ValidationStatus::Validated;
            let measures =
                quality::DifficultyMeasures::of(&candidate.patch, record.FAIL_TO_PASS.len());
            record.difficulty = Some(measures.band());
            record.difficulty_measures = measures.to_map();
            let harness_runs: Vec<harness::HarnessRun<'_>> = runs
                .harness
                .iter()
                .map(|(side, exit_code, maps)| harness::HarnessRun {
                    side: *side,
                    exit_code: *exit_code,
                    maps,
                })
                .collect();
            match harness::choose_log_parser(
                &request.environment.parser,
                &harness_runs,
                &record.FAIL_TO_PASS,
                &record.PASS_TO_PASS,
            ) {
                Ok(choice) => {
                    record.log_parser = Some(choice.parser.to_string());
                    record.harness_unread = choice.unread;
                }
                Err(reason) => record.log_parser_reason = Some(reason),
            }
        }
        Some((class, mut reason)) => {
            if class == FailureClass::NoFailToPass && !record.needs_network.is_empty() {
                reason.push_str(&format!(
                    "; {} test(s) failed for want of a network (needs-network; the tests ran with network `{}`): {}",
                    record.needs_network.len(),
                    record.network,
                    decide::preview(&record.needs_network)
                ));
            }
            if runs_stopped {
                reason.push_str(
                    "; validation stopped after the first run of each side, where no test \
                     failed before the gold patch and passed after it",
                );
            }
            record.status = ValidationStatus::Rejected;
            record.failure_class = Some(class);
            record.reason = Some(reason);
        }
    }
}

/// The patches a side's runs apply, by name.
fn patches_of(side: Side, candidate: &Candidate) -> Vec<(&'static str, &str)> {
    match side {
        Side::Base => vec![],
        Side::Before => vec![("test", candidate.test_patch.as_str())],
        Side::After => vec![
            ("test", candidate.test_patch.as_str()),
            ("gold", candidate.patch.as_str()),
        ],
    }
}

/// A run's summary for the `runs` column.
fn run_summary(output: &RunOutput) -> BTreeMap<String, String> {
    let count = |s: TestStatus| {
        output
            .statuses
            .values()
            .filter(|v| **v == s)
            .count()
            .to_string()
    };
    BTreeMap::from([
        ("exit_code".to_string(), output.exit_code.to_string()),
        ("passed".to_string(), count(TestStatus::Pass)),
        ("failed".to_string(), count(TestStatus::Fail)),
        ("errors".to_string(), count(TestStatus::Error)),
        ("skipped".to_string(), count(TestStatus::Skip)),
        ("patch_methods".to_string(), output.patch_methods.join(",")),
        ("seconds".to_string(), format!("{:.2}", output.test_seconds)),
    ])
}
