//! `kiln check-images`: the images a release names exist and are the ones its rows recorded.

use kiln_pipeline::PipelineError;
use kiln_pipeline::ops::images::{ImageVerdict, check_images};
use kiln_pipeline::ops::rebuild::RebuildVerdict;

use super::Context;
use crate::cli::CheckImagesArgs;
use crate::common::{connect, load, print_json};
use crate::exit;
use crate::failure::Failure;

/// Checks every row's image and prints one line per instance.
pub async fn run(args: CheckImagesArgs, cx: &Context) -> Result<u8, Failure> {
    let mut rows = kiln_pipeline::ops::evaluate::read_dataset(&args.release)?;
    if !args.only.is_empty() {
        rows.retain(|r| args.only.contains(&r.instance_id));
    }
    let runtime = connect(&cx.reporter).await?;
    let checks = check_images(runtime.as_ref(), &rows, !args.no_pull)
        .await
        .map_err(|e| Failure::from(PipelineError::Engine(e)))?;
    let bad = checks.iter().filter(|c| !c.verdict.is_good()).count();
    let rebuilt = if args.rebuild {
        let pipeline = load(&cx.config)?;
        let timeout = kiln_core::config::parse_duration(&args.timeout)
            .map_err(|e| Failure::new(exit::USAGE, format!("failed to read --timeout: {e}")))?;
        let logs = std::env::temp_dir().join(format!("kiln-rebuild-{}", std::process::id()));
        Some(
            kiln_pipeline::ops::rebuild::rebuild_release(
                &pipeline,
                std::sync::Arc::clone(&runtime),
                &rows,
                timeout,
                &logs,
            )
            .await?,
        )
    } else {
        None
    };
    let not_reproduced = rebuilt
        .iter()
        .flatten()
        .filter(|c| !c.verdict.is_good())
        .count();
    if cx.json {
        print_json(&serde_json::json!({
            "release": args.release,
            "rows": checks.len(),
            "bad": bad,
            "images": checks,
            "rebuilt": rebuilt,
            "not_reproduced": not_reproduced,
        }))?;
    } else {
        for check in &checks {
            let word = match check.verdict {
                ImageVerdict::Present => "ok     ",
                ImageVerdict::Pulled => "pulled ",
                ImageVerdict::Missing => "MISSING",
                ImageVerdict::DigestChanged => "CHANGED",
                ImageVerdict::Unnamed => "NO NAME",
            };
            let detail = check
                .problem()
                .map(|p| format!("  ({})", p.splitn(3, ": ").nth(2).unwrap_or_default()))
                .unwrap_or_default();
            println!("{word} {} {}{detail}", check.instance_id, check.image);
        }
        println!(
            "{} of {} image(s) exist with the digest their rows recorded",
            checks.len() - bad,
            checks.len()
        );
        if let Some(rebuilt) = &rebuilt {
            for check in rebuilt {
                let word = match check.verdict {
                    RebuildVerdict::Reproduced => "rebuilt",
                    RebuildVerdict::Differs => "DIFFERS",
                    RebuildVerdict::BuildFailed => "NOBUILD",
                    RebuildVerdict::NoSource => "NOCLONE",
                    RebuildVerdict::NoDockerfile => "NO FILE",
                };
                let detail = if check.detail.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", check.detail)
                };
                println!(
                    "{word} {} {:.0} s{detail}",
                    check.instance_id, check.seconds
                );
            }
            println!(
                "{} of {} environment(s) rebuilt from their Dockerfile with the tests the rows record",
                rebuilt.len() - not_reproduced,
                rebuilt.len()
            );
        }
    }
    Ok(if bad == 0 && not_reproduced == 0 {
        exit::OK
    } else {
        exit::INPUT
    })
}
