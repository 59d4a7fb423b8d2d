//! `kiln run`, `kiln refresh` and `kiln stage`.

use std::collections::BTreeSet;
use std::sync::Arc;

use kiln_pipeline::{PipelineError, RunOptions, RunSelection, Runner};

use super::Context;
use super::push::push_release;
use crate::cli::{RefreshArgs, RunArgs, StageArgs};
use crate::common::{
    check_environment, connect_if_needed, for_shard, load, print_summary, run_all,
    run_interruptibly, with_lm,
};
use crate::exit;
use crate::failure::Failure;

/// `kiln run`: every stage, resuming the latest run when it is unfinished.
pub async fn run(args: RunArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = for_shard(load(&cx.config)?, args.shard.as_deref())?;
    let selection = match (args.new, args.run) {
        (_, Some(id)) => RunSelection::Id(id),
        (true, None) => RunSelection::New,
        (false, None) => RunSelection::ResumeOrNew,
    };
    let options = RunOptions {
        concurrency: args.concurrency,
        allow_fewer_rows: args.allow_fewer_rows,
        ..RunOptions::default()
    };
    let runner = run_all(pipeline, &selection, options, Arc::clone(&cx.reporter)).await?;
    print_summary(&runner, cx.json)?;
    Ok(exit::OK)
}

/// `kiln refresh`: one month, then its release pushed when asked.
pub async fn refresh(args: RefreshArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?
        .for_month(&args.month)
        .map_err(|e| Failure::new(exit::CONFIG, format!("failed to refresh: {e}")))?;
    let pipeline = for_shard(pipeline, args.shard.as_deref())?;
    let options = RunOptions {
        concurrency: args.concurrency,
        ..RunOptions::default()
    };
    let runner = run_all(
        pipeline,
        &RunSelection::ResumeOrNew,
        options,
        Arc::clone(&cx.reporter),
    )
    .await?;
    print_summary(&runner, cx.json)?;
    if let Some(repo) = args.push {
        let run = kiln_store::RunStore::open_dir(&runner.run_dir())
            .map_err(|e| Failure::from(PipelineError::from(e)))?;
        for release in kiln_pipeline::release::run_releases(runner.pipeline(), &run) {
            push_release(&release, &repo, false, false, false, &cx.reporter, cx.json).await?;
        }
    }
    Ok(exit::OK)
}

/// `kiln stage`: one stage of a run, all its items or the ones named.
pub async fn stage(args: StageArgs, cx: &Context) -> Result<u8, Failure> {
    let pipeline = for_shard(load(&cx.config)?, args.shard.as_deref())?;
    let name = args.name;
    check_environment(&pipeline, Some(&name))?;
    let engine = connect_if_needed(&pipeline, Some(&name), &cx.reporter).await?;
    let selection = args.run.map_or(RunSelection::Latest, RunSelection::Id);
    let options = RunOptions {
        only: (!args.only.is_empty()).then(|| args.only.into_iter().collect::<BTreeSet<_>>()),
        force: args.force,
        concurrency: args.concurrency,
        allow_fewer_rows: args.allow_fewer_rows,
        ..RunOptions::default()
    };
    let lm = kiln_pipeline::language_model(&pipeline, Some(&name), &options.secrets)?;
    let mut runner = with_lm(
        Runner::open(
            pipeline,
            &selection,
            Arc::clone(&cx.reporter),
            engine.clone(),
        )?,
        lm,
    );
    let stage = name.clone();
    run_interruptibly(&mut runner, engine.as_ref(), |r| {
        Box::pin(async move { r.run_stage(&stage, &options).await.map(|_| ()) })
    })
    .await?;
    print_summary(&runner, cx.json)?;
    Ok(exit::OK)
}
