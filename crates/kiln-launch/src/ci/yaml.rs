//! The CI configuration files of a repository and the bits of YAML syntax kiln reads them
//! with, line by line (see the module above).

use std::path::Path;

/// The CI configuration files at `root` (GitHub Actions workflows, Travis, CircleCI, Azure
/// Pipelines, GitLab), as (path relative to the root, text), in a stable order.
pub(super) fn yaml_files(root: &Path) -> Vec<(String, String)> {
    let mut files: Vec<String> = Vec::new();
    for dir in [".github/workflows"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            let mut names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
                .collect();
            names.sort();
            files.extend(names.into_iter().map(|n| format!("{dir}/{n}")));
        }
    }
    files.extend(
        [
            ".travis.yml",
            ".circleci/config.yml",
            "azure-pipelines.yml",
            ".gitlab-ci.yml",
        ]
        .iter()
        .map(|s| (*s).to_string()),
    );
    files
        .into_iter()
        .filter_map(|file| {
            let text = std::fs::read_to_string(root.join(&file)).ok()?;
            Some((file, text))
        })
        .collect()
}

/// `value` without a trailing ` # comment`.
pub(super) fn strip_comment(value: &str) -> &str {
    match value.find(" #") {
        Some(at) if !value.starts_with(['\'', '"']) => value[..at].trim_end(),
        _ => value,
    }
}

/// `value` without the quotes around it, when it is quoted whole.
pub(super) fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}
