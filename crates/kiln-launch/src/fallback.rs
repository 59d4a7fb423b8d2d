//! Where the rules stop: the repository's recipe first (free), then the launch agent (paid),
//! in the same container, before the launch is written down as failed.

use std::time::Duration;

use kiln_core::{ContainerSpec, RuntimeError, Session};
use kiln_schema::{BuiltBy, EnvironmentRecord, FailureClass};

use crate::agent::{self, Handover, Workplace};
use crate::classify::classify_setup;
use crate::environment::Known;
use crate::recipe::{self, Recipe};
use crate::request::LaunchRequest;
use crate::verify::{BaselineRun, Failure, baseline, run_or_fail};

/// What the rules were doing when they stopped.
pub(crate) struct Stopped<'a> {
    /// How they stopped.
    pub(crate) failure: Failure,
    /// The plan's name and language.
    pub(crate) plan: &'a str,
    pub(crate) language: &'a str,
    /// Setup steps not run yet.
    pub(crate) remaining: Vec<String>,
    /// The spec of the launch's container.
    pub(crate) spec: &'a ContainerSpec,
    /// The commit's tree and the test patch's files.
    pub(crate) known: &'a Known,
    /// What the rules tried that did not help (a repair whose step failed), for the agent.
    pub(crate) tried: Option<String>,
}

/// Tries the repository's recipe for the plan, then the agent, where the rules stopped (in
/// setup, or in the test phase where no rule helped or a rule's repair failed), for every
/// failure class but infrastructure and budget; `Ok(None)` when one of them built the
/// environment, else the failure that stands.
///
/// # Errors
/// Engine failures only.
pub(crate) async fn fall_back(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    stopped: Stopped<'_>,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Failure>, RuntimeError> {
    let Stopped {
        mut failure,
        plan,
        language,
        remaining,
        spec,
        known,
        tried,
    } = stopped;
    // The engine's failures and a spent budget are not the repository's: nothing a recipe or
    // the agent runs mends them.
    if matches!(
        failure.class,
        FailureClass::Infra | FailureClass::AgentBudget
    ) {
        return Ok(Some(failure));
    }
    // A recipe's or the agent's test command is its own: the plan's whole-suite command, the
    // tests the plan's command left out and its runner's listing do not go with it.
    record.whole_test_command = None;
    record.tests_left_out.clear();
    record.collect_command = None;
    let mut note = tried;
    let found = request.recipes.as_deref().and_then(|dir| {
        recipe::find(
            dir,
            &record.repo,
            plan,
            &recipe::dependency_key(&known.tree).0,
        )
    });
    if let Some(recipe) = found {
        step("recipe");
        match replay(session, request, record, spec, known, &recipe, step).await? {
            None => return Ok(None),
            // A recipe that forges is no recipe: the launch ends there, in the container it
            // tainted, and the agent is not asked to build on it.
            Some(refused)
                if matches!(
                    refused.class,
                    FailureClass::EnvironmentEditsTests | FailureClass::EnvironmentEditsCheckout
                ) =>
            {
                return Ok(Some(refused));
            }
            // The engine failed under the replay: nothing the agent runs mends that.
            Some(stop) if stop.class == FailureClass::Infra => return Ok(Some(stop)),
            Some(recipe_failure) => {
                let replayed = format!(
                    "the recipe learned from {} was replayed where the rules stopped, and \
                     did not build ({}{}); the container holds what it did",
                    recipe.learned_from,
                    recipe_failure.class,
                    recipe_failure
                        .command
                        .as_deref()
                        .map(|c| format!(" at `{c}`"))
                        .unwrap_or_default()
                );
                note = Some(match note {
                    Some(tried) => format!("{tried}\n{replayed}"),
                    None => replayed,
                });
                failure = recipe_failure;
            }
        }
    }
    let (Some(settings), Some(model)) = (&request.settings.agent, &request.lm) else {
        return Ok(Some(failure));
    };
    let handover = Handover {
        failure,
        plan: plan.to_string(),
        language: language.to_string(),
        remaining,
        test_files: known.test_files.clone(),
        note,
    };
    agent::take_over(
        Workplace {
            session,
            spec,
            known,
            request,
            settings,
            lm: model.0.as_ref(),
            step,
        },
        record,
        handover,
    )
    .await
}

/// Replays `recipe` in the session: its environment, its steps, its test command and parser,
/// then the baseline. `None` when it built the environment.
async fn replay(
    session: &mut Session,
    request: &LaunchRequest,
    record: &mut EnvironmentRecord,
    spec: &ContainerSpec,
    known: &Known,
    recipe: &Recipe,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<Failure>, RuntimeError> {
    session.note(&format!(
        "# kiln recipe learned from {} ({})",
        recipe.learned_from, recipe.created_at
    ));
    // What a recipe may not do, whatever was written into it: set a variable that configures
    // the test runner, or end its test command with something other than the runner.
    let refused = |why: String| {
        Ok(Some(Failure::new(
            FailureClass::EnvironmentEditsTests,
            None,
            &format!(
                "the recipe learned from {} was refused: {why}",
                recipe.learned_from
            ),
        )))
    };
    if let Some(name) = recipe
        .environment
        .iter()
        .find(|(name, value)| kiln_core::judge::is_test_variable(name, value))
        .map(|(name, _)| name)
    {
        return refused(format!("it sets {name}, which configures the test runner"));
    }
    if let Some(why) = crate::agent::guard::masked_status(&recipe.test_command) {
        return refused(why);
    }
    for (name, value) in &recipe.environment {
        record.environment.insert(name.clone(), value.clone());
    }
    session.set_env(&record.environment);
    let runtime = std::sync::Arc::clone(session.runtime());
    let mut watch = kiln_core::checkout::Watch::new(
        std::sync::Arc::clone(&known.tree),
        known.test_files.clone(),
        known.language,
    );
    for command in &recipe.steps {
        step(&format!("recipe: {}", first_line(command)));
        watch.before(runtime.as_ref(), session.id()).await?;
        let outcome = match run_or_fail(
            session,
            command,
            request.settings.command_timeout,
            FailureClass::Build,
        )
        .await?
        {
            Ok(outcome) => outcome,
            Err(failure) => return Ok(Some(failure)),
        };
        if let Some(refusal) = watch.after(runtime.as_ref(), session.id()).await?.refusal {
            return Ok(Some(Failure::new(
                crate::environment::class(&refusal),
                Some(command),
                &format!(
                    "the recipe learned from {} was refused at this step: {}",
                    recipe.learned_from,
                    refusal.reason()
                ),
            )));
        }
        if outcome.exit_code != 0 {
            return Ok(Some(Failure::new(
                classify_setup(&outcome),
                Some(command),
                &outcome.output,
            )));
        }
        record.setup_commands.push(command.clone());
    }
    let rules_test = (
        record.test_command.clone(),
        record.parser.clone(),
        record.rebuild_commands.clone(),
    );
    record.test_command.clone_from(&recipe.test_command);
    record.parser.clone_from(&recipe.parser);
    record.parser_script.clone_from(&recipe.parser_script);
    record.rebuild_commands.clone_from(&recipe.rebuild_commands);
    step("recipe: baseline tests");
    let run = BaselineRun::new(request, spec, known);
    match baseline(session, &run, record).await?.failure {
        None => {
            record.built_by = Some(BuiltBy::Recipe);
            record
                .version_reason
                .push_str(&format!("; recipe learned from {}", recipe.learned_from));
            Ok(None)
        }
        Some(failure) => {
            session.runtime().remove_image(&request.image_tag).await?;
            (record.test_command, record.parser, record.rebuild_commands) = rules_test;
            record.parser_script = None;
            Ok(Some(failure))
        }
    }
}

fn first_line(command: &str) -> &str {
    let line = command.lines().next().unwrap_or_default();
    let end = line.char_indices().nth(60).map_or(line.len(), |(i, _)| i);
    &line[..end]
}

/// How long the container of a launch may live when its agent may take over too.
#[must_use]
pub(crate) fn agent_lifetime(request: &LaunchRequest) -> Duration {
    request
        .settings
        .agent
        .as_ref()
        .map_or(Duration::ZERO, |agent| {
            agent.timeout + request.settings.test_timeout
        })
}
