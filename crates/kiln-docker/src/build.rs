//! What an image build sends and reads: the build context, with the build's labels on every
//! step, and the step images of the build log.

use std::collections::HashMap;

use kiln_core::ImageBuild;

/// The tar archive of a build context: the Dockerfile (with `labels` on every step, see
/// [`labelled`]), the extra files, then the entries of [`ImageBuild::context_archive`] byte
/// for byte.
pub(crate) fn build_context(
    build: &ImageBuild,
    labels: &HashMap<String, String>,
) -> Result<Vec<u8>, std::io::Error> {
    let dockerfile = labelled(&build.dockerfile, labels);
    let mut archive = tar::Builder::new(Vec::new());
    let files = std::iter::once(("Dockerfile", dockerfile.as_bytes())).chain(
        build
            .context
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_slice())),
    );
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        // A fixed mtime keeps the classic builder's COPY cache valid across identical builds.
        header.set_mtime(0);
        archive.append_data(&mut header, path, contents)?;
    }
    let mut bytes = archive.into_inner()?;
    if !build.context_archive.is_empty() {
        // A tar archive ends with two zero blocks; without them the entries of the given
        // archive (which ends with its own) continue this one, with their headers untouched.
        const END: usize = 1024;
        if bytes.len() < END || bytes[bytes.len() - END..].iter().any(|b| *b != 0) {
            return Err(std::io::Error::other(
                "unexpected end of the context archive",
            ));
        }
        bytes.truncate(bytes.len() - END);
        bytes.extend_from_slice(&build.context_archive);
    }
    Ok(bytes)
}

/// `dockerfile` with a `LABEL` instruction of `labels` after each `FROM`, so that the image of
/// every step carries them. The engine applies a build's labels in a step of its own at the
/// end: a build cut off before it (its client killed) leaves the images of its finished steps
/// without them, where no cleanup by label finds them. A Dockerfile with a heredoc is left as
/// it is (a line inside one is no instruction).
pub(crate) fn labelled(dockerfile: &str, labels: &HashMap<String, String>) -> String {
    if labels.is_empty() || dockerfile.contains("<<") {
        return dockerfile.to_string();
    }
    let escape = escape_char(dockerfile);
    let quote = |text: &str| {
        let mut out = String::from('"');
        for c in text.chars() {
            if matches!(c, '"' | '$') || c == escape {
                out.push(escape);
            }
            out.push(if c.is_control() { ' ' } else { c });
        }
        out.push('"');
        out
    };
    let mut sorted: Vec<(&String, &String)> = labels.iter().collect();
    sorted.sort();
    let instruction = format!(
        "LABEL {}\n",
        sorted
            .iter()
            .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut out = String::with_capacity(dockerfile.len() + instruction.len() * 2);
    // Whether the line before continues (ends with the escape character), and whether the
    // instruction it belongs to is a `FROM`.
    let (mut continued, mut in_from) = (false, false);
    for line in dockerfile.split_inclusive('\n') {
        out.push_str(line);
        let text = line.trim();
        // Comment lines, and empty ones, may sit inside a continued instruction.
        if text.starts_with('#') || (continued && text.is_empty()) {
            continue;
        }
        if !continued {
            in_from = text
                .split_whitespace()
                .next()
                .is_some_and(|word| word.eq_ignore_ascii_case("FROM"));
        }
        continued = text.ends_with(escape);
        if in_from && !continued {
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&instruction);
            in_from = false;
        }
    }
    out
}

/// The escape character of a Dockerfile: its `# escape=` parser directive's, else `\`.
fn escape_char(dockerfile: &str) -> char {
    for line in dockerfile.lines() {
        // Parser directives come first, as comments of the form `# name=value`.
        let Some(directive) = line.trim().strip_prefix('#') else {
            break;
        };
        let Some((name, value)) = directive.split_once('=') else {
            break;
        };
        if name.trim().eq_ignore_ascii_case("escape")
            && let Some(c) = value.trim().chars().next()
        {
            return c;
        }
    }
    '\\'
}

/// The image id a build log line announces for a finished step: ` ---> 5d0c68982bd0` (the
/// classic builder, 12 hex digits) or `--> 5d0c68982bd` (Buildah behind Podman's API, 11).
pub(crate) fn step_image(line: &str) -> Option<&str> {
    let id = line
        .trim()
        .strip_prefix("--->")
        .or_else(|| line.trim().strip_prefix("-->"))?
        .trim();
    (id.len() >= 11 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{labelled, step_image};

    fn labels() -> HashMap<String, String> {
        HashMap::from([
            ("kiln.managed".to_string(), "1".to_string()),
            (
                "kiln.dataset".to_string(),
                "/data/my \"set\" $HOME".to_string(),
            ),
        ])
    }

    #[test]
    fn every_stage_labels_its_steps_right_after_its_from() {
        let dockerfile = "# Environment of x\nFROM kiln/python:3.11-abc AS build\nRUN make\nfrom scratch\nCOPY --from=build /a /a\n";
        assert_eq!(
            labelled(dockerfile, &labels()),
            "# Environment of x\n\
             FROM kiln/python:3.11-abc AS build\n\
             LABEL \"kiln.dataset\"=\"/data/my \\\"set\\\" \\$HOME\" \"kiln.managed\"=\"1\"\n\
             RUN make\n\
             from scratch\n\
             LABEL \"kiln.dataset\"=\"/data/my \\\"set\\\" \\$HOME\" \"kiln.managed\"=\"1\"\n\
             COPY --from=build /a /a\n"
        );
    }

    #[test]
    fn a_continued_from_is_labelled_after_its_last_line() {
        let one = HashMap::from([("a".to_string(), "1".to_string())]);
        assert_eq!(
            labelled("FROM \\\n  # the base\n  debian:bookworm\nRUN true", &one),
            "FROM \\\n  # the base\n  debian:bookworm\nLABEL \"a\"=\"1\"\nRUN true"
        );
        // No trailing line break: the label still starts a line of its own.
        assert_eq!(
            labelled("FROM debian:bookworm", &one),
            "FROM debian:bookworm\nLABEL \"a\"=\"1\"\n"
        );
        // A `FROM` inside another instruction's continuation is no instruction.
        assert_eq!(
            labelled("FROM x\nRUN echo \\\n  FROM y\n", &one),
            "FROM x\nLABEL \"a\"=\"1\"\nRUN echo \\\n  FROM y\n"
        );
    }

    #[test]
    fn the_escape_directive_sets_how_labels_are_quoted() {
        let one = HashMap::from([("a".to_string(), "say \"hi\"".to_string())]);
        assert_eq!(
            labelled("# escape=`\nFROM x `\n  AS y\nRUN dir c:\\\n", &one),
            "# escape=`\nFROM x `\n  AS y\nLABEL \"a\"=\"say `\"hi`\"\"\nRUN dir c:\\\n"
        );
    }

    #[test]
    fn heredocs_and_empty_labels_leave_the_dockerfile_as_it_is() {
        let heredoc = "FROM x\nRUN <<EOF\nFROM y\nEOF\n";
        assert_eq!(labelled(heredoc, &labels()), heredoc);
        assert_eq!(labelled("FROM x\n", &HashMap::new()), "FROM x\n");
    }

    #[test]
    fn finished_steps_of_a_build_log_name_their_images() {
        assert_eq!(step_image(" ---> 5d0c68982bd0\n"), Some("5d0c68982bd0"));
        // As Podman 4.3 prints them.
        assert_eq!(step_image("--> 44b9e5fdde2\n"), Some("44b9e5fdde2"));
        assert_eq!(step_image("--> Using cache 46b3d30d831bac83\n"), None);
        assert_eq!(step_image(" ---> Running in 0a1b2c3d4e5f\n"), None);
        assert_eq!(step_image(" ---> Using cache\n"), None);
        assert_eq!(step_image("Step 2/3 : RUN true\n"), None);
        assert_eq!(step_image(" ---> abc\n"), None);
        assert_eq!(step_image("--> 5d0c68982b\n"), None);
    }
}
