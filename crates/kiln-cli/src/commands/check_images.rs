//! `kiln check-images`: the images a release names exist and are the ones its rows recorded.

use kiln_pipeline::PipelineError;
use kiln_pipeline::images::{ImageVerdict, check_images};

use super::Context;
use crate::cli::CheckImagesArgs;
use crate::common::{connect, print_json};
use crate::exit;
use crate::failure::Failure;

/// Checks every row's image and prints one line per instance.
pub async fn run(args: CheckImagesArgs, cx: &Context) -> Result<u8, Failure> {
    let rows = kiln_pipeline::evaluate::read_dataset(&args.release)?;
    let runtime = connect(&cx.reporter).await?;
    let checks = check_images(runtime.as_ref(), &rows, !args.no_pull)
        .await
        .map_err(|e| Failure::from(PipelineError::Engine(e)))?;
    let bad = checks.iter().filter(|c| !c.verdict.is_good()).count();
    if cx.json {
        print_json(&serde_json::json!({
            "release": args.release,
            "rows": checks.len(),
            "bad": bad,
            "images": checks,
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
    }
    Ok(if bad == 0 { exit::OK } else { exit::INPUT })
}
