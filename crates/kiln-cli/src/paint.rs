//! Colour, as uv and nextest use it: on a terminal (unless `NO_COLOR` is set), always or never
//! with `--color`; outcomes green, yellow or red by what they mean, `error:` red and `hint:`
//! cyan. Plain ANSI sequences: no terminal library.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Whether stdout and stderr are painted, decided once by [`init`].
static PAINT: OnceLock<(bool, bool)> = OnceLock::new();

/// Decides for the whole process.
pub fn init(choice: ColorChoice) {
    let auto =
        |terminal: bool| terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let decided = match choice {
        ColorChoice::Always => (true, true),
        ColorChoice::Never => (false, false),
        ColorChoice::Auto => (
            auto(std::io::stdout().is_terminal()),
            auto(std::io::stderr().is_terminal()),
        ),
    };
    let _ = PAINT.set(decided);
}

/// Which stream a text goes to.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

fn enabled(stream: Stream) -> bool {
    let (out, err) = PAINT.get().copied().unwrap_or((false, false));
    match stream {
        Stream::Stdout => out,
        Stream::Stderr => err,
    }
}

fn paint(stream: Stream, code: &str, text: &str) -> String {
    if enabled(stream) {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// An outcome or state (`validated`, `built`, `failed:build`, `rejected`, ...), coloured by
/// what it means: green for a row that holds, yellow for one set aside, red for a failure.
pub fn outcome(stream: Stream, text: &str) -> String {
    let word = text.split([':', ' ']).next().unwrap_or(text);
    let code = match word {
        "validated" | "built" | "ok" | "kept" => "32",
        "rejected" | "filtered" | "dropped" | "skipped" | "other-platform" | "pending" => "33",
        "failed" | "error" | "launch-failed" | "validate-failed" | "invalid-input" => "31",
        _ => return text.to_string(),
    };
    paint(stream, code, text)
}

/// An error message for stderr: `error:` in bold red, each `hint:` line's prefix in cyan.
pub fn error(message: &str) -> String {
    let message = message.replace(
        "\nhint:",
        &format!("\n{}", paint(Stream::Stderr, "36", "hint:")),
    );
    format!("{} {message}", paint(Stream::Stderr, "1;31", "error:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_coloured_by_meaning_only_when_painting() {
        // Tests share the process: painting is forced on for this check.
        let _ = PAINT.set((true, true));
        if enabled(Stream::Stderr) {
            assert_eq!(
                outcome(Stream::Stderr, "failed:build"),
                "\x1b[31mfailed:build\x1b[0m"
            );
            assert_eq!(
                outcome(Stream::Stdout, "validated"),
                "\x1b[32mvalidated\x1b[0m"
            );
            assert_eq!(outcome(Stream::Stdout, "mystery"), "mystery");
            let text = error("boom\nhint: try this");
            assert!(
                text.starts_with("\x1b[1;31merror:\x1b[0m boom\n\x1b[36mhint:\x1b[0m try"),
                "{text:?}"
            );
        }
    }
}
