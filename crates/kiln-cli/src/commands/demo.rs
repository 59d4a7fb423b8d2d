//! `kiln demo`: the fixture projects through every stage on the local engine, judged against
//! what each must become.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use kiln_pipeline::{InstanceState, PipelineError, RunOptions, RunSelection, Runner};

use super::Context;
use crate::cli::DemoArgs;
use crate::common::{connect, load, print_json, print_lm_lines, run_interruptibly, with_lm};
use crate::exit;
use crate::failure::Failure;

/// The demo's LM endpoint: the model given, or the first the endpoint lists.
async fn demo_lm(
    url: Option<String>,
    model: Option<String>,
) -> Result<Option<kiln_demo::DemoLm>, Failure> {
    let Some(base_url) = url else {
        return Ok(None);
    };
    let base_url = base_url.trim_end_matches('/').to_string();
    let model = match model {
        Some(model) => model,
        None => kiln_demo::first_model(&base_url).await.map_err(|e| {
            Failure::new(
                exit::INPUT,
                format!("failed to {e}; name one with --lm-model"),
            )
        })?,
    };
    Ok(Some(kiln_demo::DemoLm { base_url, model }))
}

/// Runs the demo and prints what became of each instance.
pub async fn run(args: DemoArgs, cx: &Context) -> Result<u8, Failure> {
    let started = std::time::Instant::now();
    // The host's bundle is what its own tools trust; installing it in the images makes a
    // TLS-inspecting proxy work and changes nothing elsewhere.
    let host_bundle = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
    let ca_bundle = args
        .ca_bundle
        .or_else(|| host_bundle.exists().then_some(host_bundle));
    let engine = connect(&cx.reporter).await?;
    let lm = demo_lm(args.lm_url, args.lm_model).await?;
    let dir = std::path::absolute(args.dir).context("resolve the demo directory")?;
    let demo = kiln_demo::prepare_with_lm(&dir, ca_bundle.as_deref(), args.repeats, lm.as_ref())
        .map_err(|e| Failure::new(exit::INPUT, format!("failed to prepare the demo: {e}")))?;
    let pipeline = load(&demo.config_path)?;
    let mut options = RunOptions::default();
    options
        .secrets
        .insert(kiln_demo::DEMO_TOKEN_ENV, &demo.token);
    let client = kiln_pipeline::language_model(&pipeline, None, &options.secrets)?;
    let mut runner = with_lm(
        Runner::open(
            pipeline,
            &RunSelection::New,
            Arc::clone(&cx.reporter),
            Some(Arc::clone(&engine)),
        )?,
        client,
    );
    run_interruptibly(&mut runner, Some(&engine), |r| {
        Box::pin(async move { r.run_all(&options).await.map(|_| ()) })
    })
    .await?;

    let run = kiln_store::RunStore::open_dir(&runner.run_dir())
        .map_err(|e| Failure::from(PipelineError::from(e)))?;
    let summaries = kiln_pipeline::instance_summaries(runner.pipeline(), &run)?;
    // The release the demo's export wrote (`.../releases/2024-09`), not the folder of all.
    let release = kiln_pipeline::release_dirs(runner.pipeline(), runner.run_id())
        .into_iter()
        .map(|(_, dir)| dir)
        .next()
        .unwrap_or_else(|| runner.pipeline().dataset.root.join("demo").join("releases"));
    let verdicts = kiln_demo::judge(&demo.layout, &summaries, lm.is_some());
    let spent = kiln_pipeline::lm_spent(&runner.run_dir())?;
    if cx.json {
        let instances: Vec<serde_json::Value> = verdicts
            .instances
            .iter()
            .map(|i| {
                let v = &i.verdict;
                serde_json::json!({"instance_id": i.instance_id, "summary": i.summary, "as_expected": v.is_ok(), "mismatch": v.as_ref().err(), "judged": v.as_ref().ok().and_then(Option::as_ref)})
            })
            .collect();
        let stages: serde_json::Map<String, serde_json::Value> = runner
            .stage_manifests()
            .into_iter()
            .filter_map(|(stage, m)| m.map(|m| (stage, serde_json::json!(m.stats))))
            .collect();
        print_json(&serde_json::json!({
            "run_dir": runner.run_dir(), "release_dir": release, "seconds": started.elapsed().as_secs_f64(),
            "instances_in": verdicts.instances_in, "built": verdicts.built, "validated": verdicts.validated,
            "instances": instances, "lm": spent, "stage_stats": stages,
        }))?;
    } else {
        let unexpected = verdicts.mismatches().len();
        println!(
            "\nkiln demo: {} instances in, {} built, {} validated, {} rejected, {} failed to launch ({:.0}s); {}",
            verdicts.instances_in,
            verdicts.built,
            verdicts.validated,
            verdicts.rejected,
            verdicts.launch_failed,
            started.elapsed().as_secs_f64(),
            if unexpected == 0 {
                "every one ended as its fixture expects".to_string()
            } else {
                format!("{unexpected} did not end as its fixture expects")
            }
        );
        // Each line says how the instance ended; an ending its fixture does not expect says
        // so below it (a rejected row is what some fixtures are for).
        for instance in &verdicts.instances {
            let mark = instance
                .summary
                .as_ref()
                .map_or("no row", |s| s.state.as_str());
            let detail = match &instance.summary {
                Some(s) if s.state == InstanceState::Validated => format!(
                    "FAIL_TO_PASS {:?}; {} PASS_TO_PASS",
                    s.fail_to_pass,
                    s.pass_to_pass.len()
                ),
                Some(s) => format!(
                    "{}{}",
                    s.stop_class().unwrap_or("-"),
                    s.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                None => "no row".into(),
            };
            let mark = crate::paint::outcome(crate::paint::Stream::Stdout, &format!("{mark:<13}"));
            println!("  {mark} {:<24} {detail}", instance.instance_id);
            if let Some(s) = instance.summary.as_ref().filter(|s| s.agent_steps > 0) {
                println!(
                    "         launch agent: {} turns, {} tokens, ${:.4}; built by {} (its steps: {}/logs)",
                    s.agent_steps,
                    s.agent_tokens,
                    s.agent_cost_usd,
                    s.built_by.map_or("nothing", kiln_schema::BuiltBy::as_str),
                    runner.run_dir().display()
                );
            }
            match &instance.verdict {
                Err(why) => println!("         UNEXPECTED, the fixture expects otherwise: {why}"),
                Ok(Some(judged)) => println!("         {judged}"),
                Ok(None) => {}
            }
        }
        print_lm_lines(&runner, spent.as_ref());
        println!("release: {}", release.display());
        println!("run:     {} (logs under logs/)", runner.run_dir().display());
        // The crawl reads the demo's own GitHub, which lives only while this command runs:
        // the stages after it are what can be run again on their own.
        println!(
            "again:   kiln --config {} stage validate --only ID --force (any stage after the crawl; `kiln demo` runs everything again)",
            demo.config_path.display()
        );
    }
    let mismatches = verdicts.mismatches();
    if mismatches.is_empty() {
        Ok(exit::OK)
    } else {
        Err(Failure::new(
            exit::DEMO_MISMATCH,
            format!(
                "{} instance(s) did not end as expected:\n{}",
                mismatches.len(),
                mismatches.join("\n")
            ),
        ))
    }
}
