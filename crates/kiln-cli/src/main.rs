//! `kiln`: turns merged pull requests into verified, executable task instances.
//!
//! This binary only parses arguments, draws progress, maps errors to exit codes and calls the
//! libraries; see ARCHITECTURE.md for where the work happens. The arguments are in `cli`, each
//! subcommand in a module of `commands`.

// Printing is this binary's job; the workspace lints keep it out of the libraries.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "printing is what this program is for"
)]

mod cli;
mod commands;
mod common;
mod exit;
mod failure;
mod paint;
mod progress;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser as _;

use cli::{Cli, Command};
use commands::Context;
use failure::Failure;
use progress::{Mode, Progress};

fn main() -> ExitCode {
    exit::quiet_on_a_closed_pipe();
    let cli = Cli::parse();
    let json = cli.json;
    paint::init(cli.color);
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            failure.report(json);
            ExitCode::from(failure.code)
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "kiln=debug,info",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let cx = Context {
        config: cli.config,
        json: cli.json,
        reporter: Arc::new(Progress::new(Mode::detect(cli.json, cli.quiet))),
    };
    match cli.command {
        Command::Check => commands::check::check(&cx),
        Command::Graph => commands::check::graph(&cx),
        Command::Parse(args) => commands::parse::run(args, cx.json),
        Command::Repairs => commands::repairs::run(cx.json),
        Command::Recipes => commands::recipes::run(&cx),
        Command::Report(args) => commands::report::run(args, &cx),
        Command::Status(args) => commands::status::run(args, &cx),
        Command::Run(args) => commands::run::run(args, &cx).await,
        Command::Refresh(args) => commands::run::refresh(args, &cx).await,
        Command::Stage(args) => commands::run::stage(args, &cx).await,
        Command::Push(args) => commands::push::run(args, &cx).await,
        Command::Evaluate(args) => commands::evaluate::run(args, &cx).await,
        Command::CheckImages(args) => commands::check_images::run(args, &cx).await,
        Command::Merge(args) => commands::merge::run(args, &cx).await,
        Command::Deploy(args) => commands::deploy::run(args, &cx),
        Command::Gc(args) => commands::gc::run(args, &cx).await,
        Command::Demo(args) => commands::demo::run(args, &cx).await,
    }
}
