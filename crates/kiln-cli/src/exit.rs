//! Exit codes of `kiln`, in one place. `kiln --help` and README.md print this table.

/// Success.
pub const OK: u8 = 0;
/// An unexpected failure inside kiln (a bug: please report it).
pub const INTERNAL: u8 = 1;
/// The command line is wrong (clap's own code for usage errors).
pub const USAGE: u8 = 2;
/// The pipeline config is invalid; every problem is printed with file, line and key.
pub const CONFIG: u8 = 3;
/// No Docker engine answers, or the engine failed mid-stage (the items in flight are left
/// undone, so a re-run resumes them); the message says how to start one.
pub const ENGINE: u8 = 4;
/// The run store or the disk failed: disk full, read-only, permissions, a corrupt manifest, or
/// a dataset locked by another live kiln process.
pub const STORE: u8 = 5;
/// Input is missing or unreadable: the task file, a release, or a stage's input stage has not
/// run.
pub const INPUT: u8 = 6;
/// `kiln demo` ran, but an instance did not end as its fixture says it must.
pub const DEMO_MISMATCH: u8 = 7;
/// A push failed: the Hugging Face Hub or the image registry refused it or could not be
/// reached (what was sent is kept; a re-run sends the rest).
pub const PUBLISH: u8 = 8;
/// Interrupted by Ctrl-C (after removing this run's containers); re-run to resume.
pub const INTERRUPTED: u8 = 130;

/// The table shown in `--help`.
pub const TABLE: &str = "\
Exit codes:
  0    success
  1    internal error (a bug in kiln)
  2    usage error
  3    invalid pipeline config (each problem printed with file:line:column and key)
  4    no Docker engine reachable, or the engine failed, or a package registry did not
       answer and items were deferred (re-run to resume)
  5    run store or disk error (full, read-only, permissions, corrupt manifest, dataset
       locked by another kiln)
  6    missing or unreadable input (task file, release, or an input stage that has not run)
  7    demo: an instance did not end as its fixture expects
  8    push: the Hugging Face Hub or the image registry refused or could not be reached
       (what was sent is kept; re-run to send the rest)
  130  interrupted by Ctrl-C (containers removed; re-run to resume)";

/// Ends the program quietly when what reads its output went away (`kiln status | head -1`),
/// as Unix tools do: Rust ignores SIGPIPE, so `println!` on a closed pipe panics with "failed
/// printing to stdout: Broken pipe". That panic exits with 141, the status a shell reports for
/// a program SIGPIPE ended, and prints nothing; every other panic is reported as before.
pub fn quiet_on_a_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}
