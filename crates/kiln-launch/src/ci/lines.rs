//! Shell lines as CI configurations and task runners write them.

/// Shell lines, continuations (`\` at the end) joined, blank and comment lines left out.
pub(super) fn shell_lines(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = line.trim();
        if let Some(head) = line.strip_suffix('\\') {
            current.push_str(head.trim_end());
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let command = std::mem::take(&mut current);
        let command = command.trim();
        if !command.is_empty() && !command.starts_with('#') {
            out.push(command.to_string());
        }
    }
    let rest = current.trim();
    if !rest.is_empty() {
        out.push(rest.to_string());
    }
    out
}
