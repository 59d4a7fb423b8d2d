//! Writes the ecosystem fixtures (`kiln_testkit::write_ecosystems`) into a directory, for
//! scripts that run kiln on them (`scripts/bench-launch.sh eco`).
//!
//! Usage: `cargo run -p kiln-testkit --example write-ecosystems -- DIR`
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "printing is what this program is for"
)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: write-ecosystems DIR");
        return ExitCode::from(2);
    };
    match kiln_testkit::write_ecosystems(&dir) {
        Ok(layout) => {
            println!("{}", layout.tasks_file.display());
            for instance in &layout.instances {
                println!("{}", instance.instance_id);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("write-ecosystems: {e}");
            ExitCode::FAILURE
        }
    }
}
