//! `kiln parse`: a test log read as validation reads it.

use kiln_testlog::ReadLogError;

use crate::cli::ParseArgs;
use crate::common::print_json;
use crate::exit;
use crate::failure::Failure;

/// Prints the statuses, the totals and whether they agree.
pub fn run(args: ParseArgs, json: bool) -> Result<u8, Failure> {
    let names = kiln_testlog::parser_names();
    let unknown = |name: &str| {
        Failure::new(
            exit::USAGE,
            format!("unknown parser `{name}`; kiln knows: {}", names.join(", ")),
        )
    };
    // A wrong name is a usage error before the file is even read.
    if let Some(name) = args.parser.as_deref().filter(|n| !names.contains(n)) {
        return Err(unknown(name));
    }
    let path = &args.log;
    let bytes = std::fs::read(path).map_err(|e| {
        Failure::new(
            exit::INPUT,
            format!("failed to read {}: {e}", path.display()),
        )
    })?;
    let log = String::from_utf8_lossy(&bytes);
    let (parser, parsed) = match kiln_testlog::read_log(&log, args.parser.as_deref()) {
        Ok(read) => read,
        Err(ReadLogError::UnknownParser(e)) => return Err(unknown(&e.name)),
        Err(ReadLogError::Unrecognised) => {
            return Err(Failure::new(
                exit::INPUT,
                format!(
                    "failed to recognise the format of {}; name a parser with --parser ({})",
                    path.display(),
                    names.join(", ")
                ),
            ));
        }
    };
    let counts = parsed.counts();
    if json {
        print_json(&serde_json::json!({
            "log": path, "parser": parser, "statuses": parsed.statuses, "counts": counts,
            "printed_totals": parsed.summary.map(|t| serde_json::json!({
                "passed": t.passed, "failed": t.failed, "skipped": t.skipped, "errors": t.errors})),
            "consistent": parsed.is_consistent(), "problems": parsed.problems,
        }))?;
        return Ok(exit::OK);
    }
    for (id, status) in &parsed.statuses {
        println!("{:<5} {id}", status.as_str());
    }
    println!(
        "\n{} tests by parser {parser}: {}",
        parsed.statuses.len(),
        counts
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    match parsed.summary {
        Some(t) => println!(
            "the log's own totals: passed={} failed={} skipped={} errors={}",
            t.passed, t.failed, t.skipped, t.errors
        ),
        None => println!("the log prints no totals to check against"),
    }
    if parsed.is_consistent() {
        println!("consistent: the statuses agree with the totals");
    } else {
        for problem in &parsed.problems {
            println!("problem: {problem}");
        }
        println!("inconsistent: validation would reject a run with this log as an invalid run");
    }
    Ok(exit::OK)
}
