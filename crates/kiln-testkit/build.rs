//! Embeds the fixture projects under `fixtures/` into the library, so the demo binary works
//! wherever it is installed. Generates `$OUT_DIR/fixture_files.rs`: one `FixtureFile` per file,
//! sorted by path so the output (and therefore every commit kiln-testkit makes) is stable.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir.join("fixtures");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let mut out = String::from("&[\n");
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let Ok(rel) = file.strip_prefix(&root) else {
            continue;
        };
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // fixtures/<fixture>/<step>/<path...>
        if parts.len() < 3 {
            continue;
        }
        // Dot files are stored as `dot-<name>` so that e.g. a fixture's `.gitignore` does not
        // apply to kiln's own repository.
        let path: Vec<String> = parts[2..]
            .iter()
            .map(|p| match p.strip_prefix("dot-") {
                Some(rest) => format!(".{rest}"),
                None => p.clone(),
            })
            .collect();
        let _ = writeln!(
            out,
            "    FixtureFile {{ fixture: {:?}, step: {:?}, path: {:?}, contents: include_str!({:?}) }},",
            parts[0],
            parts[1],
            path.join("/"),
            file.display().to_string(),
        );
    }
    out.push(']');
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    if let Err(e) = std::fs::write(out_dir.join("fixture_files.rs"), out) {
        panic!("cannot write fixture_files.rs: {e}");
    }
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // Byproducts of running a fixture's tests in place are not fixture content.
        if name == "__pycache__" || name.ends_with(".pyc") || name.ends_with(".egg-info") {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}
