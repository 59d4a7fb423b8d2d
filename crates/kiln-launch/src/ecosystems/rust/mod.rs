//! The Rust plan: a Cargo package or workspace, fetched from its lockfile (or, without one, from a
//! lock generated and moved back to the crates published before the base commit's date),
//! compiled once during setup and tested with `cargo test`, on Debian trixie's Rust 1.85.

use kiln_core::ImageBuild;

use super::entry::Entry;
use crate::images;
use crate::plan::{CargoScope, Plan, PlanContext, RepairContext, read};
use crate::shell::quote as shell_quote;
use crate::steps::{FreshInstall, Step, remove_untracked};

pub mod commands;
pub mod repairs;
pub mod workspace;

pub use commands::commands;

/// A new resolution in an environment of Cargo's: the `Cargo.lock` an earlier build wrote goes
/// (cargo keeps its versions); `target/` stays.
pub const FRESH: FreshInstall = FreshInstall {
    clears: "an untracked Cargo.lock",
    script: || remove_untracked(&["Cargo.lock"]),
};

/// Dockerfile of the Rust image (Debian trixie's Rust 1.85).
pub const DOCKERFILE: &str = include_str!("rust.Dockerfile");

/// kiln's script that moves a generated `Cargo.lock` to crates published before a date; the
/// Rust image holds it at [`CARGO_CUTOFF_PATH`].
pub const CARGO_CUTOFF_SCRIPT: &str = include_str!("cargo-cutoff.py");

/// Where the Rust image holds [`CARGO_CUTOFF_SCRIPT`].
pub const CARGO_CUTOFF_PATH: &str = "/usr/local/lib/kiln/cargo-cutoff.py";

/// The Rust image (`kiln/rust:1.85-<hash>`): Debian trixie's rustc and cargo.
#[must_use]
pub fn image(ca_bundle: Option<&[u8]>) -> ImageBuild {
    let script = (
        "cargo-cutoff.py".to_string(),
        CARGO_CUTOFF_SCRIPT.as_bytes().to_vec(),
    );
    images::image_with(
        DOCKERFILE.to_string(),
        vec![script],
        "rust",
        "1.85",
        ca_bundle,
    )
}

/// The toolchain of the Rust image (Debian trixie's rustc).
pub const RUSTC_VERSION: (u32, u32) = (1, 85);

/// What the repository's Cargo files say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RustProject {
    /// The root manifest declares `[workspace]`.
    pub workspace: bool,
    /// The root manifest's `[package]` name, when it has one.
    pub package: Option<String>,
    /// `Cargo.lock` is committed.
    pub lockfile: bool,
    /// `rust-version` of the package or of `[workspace.package]`.
    pub rust_version: Option<String>,
    /// `edition` of the package or of `[workspace.package]`.
    pub edition: Option<String>,
    /// The channel named by `rust-toolchain.toml` or `rust-toolchain`.
    pub toolchain: Option<String>,
    /// Root-package features whose names mark them as needed by tests (`test-utils`, ...).
    pub test_features: Vec<String>,
}

/// Reads `Cargo.toml` and friends at the root. `None` when there is no readable root manifest.
#[must_use]
pub fn detect(root: &std::path::Path) -> Option<RustProject> {
    let manifest: toml::Table = read(root, "Cargo.toml")?.parse().ok()?;
    let package = manifest.get("package").and_then(toml::Value::as_table);
    let workspace_package = manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(toml::Value::as_table);
    // A field may be `{ workspace = true }` in the package; the string then lives in
    // `[workspace.package]`.
    let field = |key: &str| {
        package
            .and_then(|p| p.get(key))
            .and_then(toml::Value::as_str)
            .or_else(|| {
                workspace_package
                    .and_then(|p| p.get(key))
                    .and_then(toml::Value::as_str)
            })
            .map(str::to_string)
    };
    let toolchain = read(root, "rust-toolchain.toml")
        .and_then(|text| text.parse::<toml::Table>().ok())
        .and_then(|doc| {
            doc.get("toolchain")
                .and_then(|t| t.get("channel"))
                .and_then(toml::Value::as_str)
                .map(str::to_string)
        })
        .or_else(|| {
            read(root, "rust-toolchain").and_then(|text| {
                // The legacy file is either a bare channel or the same TOML as the new one.
                let text = text.trim();
                match text.parse::<toml::Table>() {
                    Ok(doc) => doc
                        .get("toolchain")
                        .and_then(|t| t.get("channel"))
                        .and_then(toml::Value::as_str)
                        .map(str::to_string),
                    Err(_) => text.lines().next().map(|l| l.trim().to_string()),
                }
            })
        });
    let test_features = if package.is_some() {
        manifest
            .get("features")
            .and_then(toml::Value::as_table)
            .map(|features| {
                features
                    .keys()
                    .filter(|k| is_test_feature(k))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Some(RustProject {
        workspace: manifest.contains_key("workspace"),
        package: package
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .map(str::to_string),
        lockfile: root.join("Cargo.lock").is_file(),
        rust_version: field("rust-version"),
        edition: field("edition"),
        toolchain,
        test_features,
    })
}

/// Feature names that projects use for what their tests need (`test-utils`, `testing`).
fn is_test_feature(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "test" || name.starts_with("test-") || name.starts_with("test_") || name == "testing"
}

/// `major.minor` of a version string such as `1.70`, `1.70.0` or `1.70.0-nightly`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some((major, minor))
}

/// Why the image's Rust 1.85 was chosen, naming the file and field that were read.
#[must_use]
pub fn version_reason(project: &RustProject) -> String {
    let (major, minor) = RUSTC_VERSION;
    let base = format!("Rust {major}.{minor} (Debian trixie), the only Rust image configured");
    let mut notes = Vec::new();
    if let Some(channel) = &project.toolchain {
        match major_minor(channel) {
            Some(want) if want > RUSTC_VERSION => notes.push(format!(
                "rust-toolchain asks for {channel}, newer than {major}.{minor}: the build may fail"
            )),
            Some(_) => notes.push(format!(
                "rust-toolchain asks for {channel}; {major}.{minor} is used instead"
            )),
            None => notes.push(format!(
                "rust-toolchain asks for `{channel}`; stable {major}.{minor} is used instead"
            )),
        }
    }
    if let Some(version) = &project.rust_version {
        match major_minor(version) {
            Some(want) if want > RUSTC_VERSION => notes.push(format!(
                "rust-version {version} is newer than {major}.{minor}: the build may fail"
            )),
            _ => notes.push(format!("rust-version {version} is satisfied")),
        }
    }
    if let Some(edition) = &project.edition {
        notes.push(format!("edition {edition}"));
    }
    if notes.is_empty() {
        format!("{base}: the repository declares no toolchain, rust-version or edition")
    } else {
        format!("{base}: {}", notes.join("; "))
    }
}

/// `pkg/feat` for the test features of the root package.
fn test_features(project: &RustProject) -> Vec<String> {
    let Some(package) = &project.package else {
        return Vec::new();
    };
    // `pkg/feature` is accepted whichever packages `--workspace` selects, where a bare name is
    // an error in a workspace whose other members lack the feature.
    project
        .test_features
        .iter()
        .map(|f| format!("{package}/{f}"))
        .collect()
}

/// The Rust plan, when the root holds a `Cargo.toml`.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let project = detect(cx.root)?;
    let selection = workspace::select(cx.root, cx.scope, cx.test_files);
    // Test features are the root package's: with a selection, only when it is selected.
    let features = match (&selection, &project.package) {
        (Some(s), Some(root)) if !s.packages.contains(root) => Vec::new(),
        _ => test_features(&project),
    };
    let (packages, test_scope) = match &selection {
        Some(s) => (
            s.specs.clone(),
            format!(
                "touched: packages {} ({} of {} in the workspace)",
                s.packages.join(", "),
                s.packages.len(),
                s.total
            ),
        ),
        None => (Vec::new(), "all".to_string()),
    };
    let scope = CargoScope {
        packages,
        features,
        all_features: false,
        ci_features: crate::ci::cargo_test_features(&crate::ci::commands(cx.root)),
    };
    let (compile, test) = commands(&scope);
    // The whole workspace's tests, with the root package's test features: cargo compiles what
    // the selection left out as the run goes.
    let whole_test = selection.as_ref().map(|_| {
        commands(&CargoScope {
            packages: Vec::new(),
            features: test_features(&project),
            ..scope.clone()
        })
        .1
    });
    let mut setup = vec![Step::git_setup()];
    let mut applied_cutoff = None;
    let resolution = if project.lockfile {
        // A lockfile that no longer matches the manifests (edited by hand, or written by an old
        // cargo that resolved differently) makes `--locked` fail; resolving anew is then the
        // closest thing to what the developers built, and the log says it happened.
        setup.push(Step::Resolve(
            "cargo fetch --locked || { echo '[kiln] Cargo.lock does not match the manifests; resolving again'; cargo fetch; }".into(),
        ));
        "Cargo.lock pins every dependency".to_string()
    } else if let Some(cutoff) = cx.cutoff {
        // Cargo cannot resolve as of a date: kiln's script moves the generated lock to the
        // newest compatible releases published before the cut-off (the crates.io index records
        // each version's publication time). The image also sets
        // CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback, so what stays newer still prefers
        // versions that Rust 1.85 supports.
        setup.push(Step::Resolve("cargo generate-lockfile".into()));
        setup.push(Step::Resolve(format!(
            "python3 {CARGO_CUTOFF_PATH} {}",
            shell_quote(cutoff)
        )));
        setup.push(Step::Resolve("cargo fetch".into()));
        applied_cutoff = Some(cutoff.to_string());
        format!(
            "no Cargo.lock: generated, then every crates.io package moved to its newest compatible release published before {cutoff} (the setup log lists any left newer)"
        )
    } else {
        setup.push(Step::Resolve("cargo generate-lockfile".into()));
        setup.push(Step::Resolve("cargo fetch".into()));
        "no Cargo.lock and no date cut-off: `cargo generate-lockfile` resolved the newest versions compatible with the declared rust-version (MSRV-aware fallback)".to_string()
    };
    setup.push(compile.clone());
    let name = match (project.workspace, project.package.is_some()) {
        (true, false) => "rust-workspace",
        _ => "rust-cargo",
    };
    Some(Plan {
        name: name.to_string(),
        language: "rust",
        image: image(cx.ca_bundle),
        version_reason: version_reason(&project),
        setup,
        rebuild: vec![compile],
        test,
        test_scope,
        whole_test,
        collect: None,
        parser: "cargo",
        resolution,
        cutoff: applied_cutoff,
        repair: RepairContext {
            cargo: Some(scope),
            ..RepairContext::default()
        },
    })
}

/// Rust's line in the registry (Cargo).
pub(crate) static ENTRY: Entry = Entry {
    name: "rust",
    plan,
    rules: &[crate::repair::SYSTEM, repairs::RULES, crate::repair::LAST],
    interpreter: None,
    fresh: Some(FRESH),
    rewrites: &["Cargo.lock"],
    package_index: Some("https://index.crates.io/config.json"),
    leave_out: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::{plan_of, tree};

    #[test]
    fn a_locked_package_fetches_locked_and_tests_the_workspace() {
        let plan = plan_of(
            plan,
            &[
                (
                    "Cargo.toml",
                    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\nrust-version = \"1.70\"\n[features]\ndefault = []\ntest-utils = []\n",
                ),
                ("Cargo.lock", "version = 3\n"),
            ],
            Some("2024-01-01T00:00:00Z"),
        )
        .expect("no plan");
        assert_eq!(plan.name, "rust-cargo");
        assert_eq!(plan.parser, "cargo");
        assert!(
            plan.setup[1].render().starts_with("cargo fetch --locked"),
            "{:?}",
            plan.setup
        );
        assert_eq!(
            plan.setup[2],
            "cargo test --workspace --no-run --features demo/test-utils"
        );
        assert_eq!(
            plan.test,
            "cargo test --workspace --no-fail-fast --features demo/test-utils 2>&1"
        );
        assert!(
            plan.version_reason
                .contains("rust-version 1.70 is satisfied")
        );
        assert!(plan.resolution.contains("Cargo.lock"));
        assert_eq!(plan.cutoff, None);
        assert!(
            plan.image.tag.starts_with("kiln/rust:1.85-"),
            "{}",
            plan.image.tag
        );
    }

    #[test]
    fn a_virtual_workspace_without_lockfile_generates_one() {
        let plan = plan_of(
            plan,
            &[(
                "Cargo.toml",
                "[workspace]\nmembers = [\"a\"]\n[workspace.package]\nrust-version = \"1.90\"\nedition = \"2024\"\n",
            )],
            Some("2024-01-01T00:00:00Z"),
        )
        .expect("no plan");
        assert_eq!(plan.name, "rust-workspace");
        assert_eq!(plan.setup[1], "cargo generate-lockfile");
        assert_eq!(
            plan.setup[2],
            "python3 /usr/local/lib/kiln/cargo-cutoff.py 2024-01-01T00:00:00Z"
        );
        assert_eq!(plan.setup[3], "cargo fetch");
        assert_eq!(plan.cutoff.as_deref(), Some("2024-01-01T00:00:00Z"));
        assert!(plan.resolution.contains("published before 2024-01-01"));
        assert!(
            plan.version_reason
                .contains("rust-version 1.90 is newer than 1.85"),
            "{}",
            plan.version_reason
        );
        assert!(!plan.test.render().contains("--features"));
    }

    #[test]
    fn a_workspace_tests_the_packages_the_test_patch_touches() {
        let tmp = tree(&[
            (
                "Cargo.toml",
                "[package]\nname = \"app\"\n[features]\ntest-utils = []\n[workspace]\nmembers = [\"core\", \"demo\"]\n",
            ),
            ("Cargo.lock", "version = 3\n"),
            ("core/Cargo.toml", "[package]\nname = \"app-core\"\n"),
            ("demo/Cargo.toml", "[package]\nname = \"demo\"\n"),
        ]);
        let plan_for = |files: &[&str], scope| {
            let files: Vec<String> = files.iter().map(ToString::to_string).collect();
            plan(&PlanContext {
                root: tmp.path(),
                cutoff: None,
                ca_bundle: None,
                test_files: &files,
                scope,
                case_timeout: std::time::Duration::from_secs(300),
            })
            .expect("no plan")
        };
        let core = plan_for(&["core/tests/parse.rs"], crate::plan::TestScope::Auto);
        assert_eq!(core.test, "cargo test -p app-core --no-fail-fast 2>&1");
        assert_eq!(core.rebuild, ["cargo test -p app-core --no-run"]);
        assert_eq!(
            core.whole_test
                .as_ref()
                .map(crate::steps::TestCommand::render)
                .as_deref(),
            Some("cargo test --workspace --no-fail-fast --features app/test-utils 2>&1")
        );
        assert_eq!(
            core.test_scope,
            "touched: packages app-core (1 of 3 in the workspace)"
        );
        let root = plan_for(
            &["tests/cli.rs", "core/src/lib.rs"],
            crate::plan::TestScope::Touched,
        );
        assert_eq!(
            root.test,
            "cargo test -p app -p app-core --no-fail-fast --features app/test-utils 2>&1"
        );
        let all = plan_for(&["core/tests/parse.rs"], crate::plan::TestScope::All);
        assert_eq!(
            all.test,
            "cargo test --workspace --no-fail-fast --features app/test-utils 2>&1"
        );
        assert_eq!(all.test_scope, "all");
    }

    #[test]
    fn without_lockfile_or_cutoff_the_newest_versions_are_resolved() {
        let plan =
            plan_of(plan, &[("Cargo.toml", "[package]\nname = \"x\"\n")], None).expect("no plan");
        assert_eq!(plan.setup[1..3], ["cargo generate-lockfile", "cargo fetch"]);
        assert_eq!(plan.cutoff, None);
        assert!(plan.resolution.contains("no date cut-off"));
    }

    #[test]
    fn toolchain_files_are_read() {
        let tmp = tree(&[
            ("Cargo.toml", "[package]\nname = \"x\"\n"),
            ("rust-toolchain.toml", "[toolchain]\nchannel = \"1.92.0\"\n"),
        ]);
        let project = detect(tmp.path()).unwrap_or_default();
        assert_eq!(project.toolchain.as_deref(), Some("1.92.0"));
        assert!(version_reason(&project).contains("newer than 1.85"));
        let tmp = tree(&[
            ("Cargo.toml", "[package]\nname = \"x\"\n"),
            ("rust-toolchain", "nightly-2023-05-01\n"),
        ]);
        let project = detect(tmp.path()).unwrap_or_default();
        assert_eq!(project.toolchain.as_deref(), Some("nightly-2023-05-01"));
        assert!(version_reason(&project).contains("stable 1.85 is used instead"));
        assert!(detect(tree(&[("README.md", "")]).path()).is_none());
    }

    #[test]
    fn the_cargo_cutoff_script_passes_its_self_test() {
        // The script runs inside the Rust image; its pure parts (version order, caret
        // compatibility, index paths, lock rewriting) are checked here with the host's Python.
        let out = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/src/ecosystems/rust/cargo-cutoff.py"
            ))
            .arg("--self-test")
            .output()
            .expect("python3 (needed by this test)");
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let rust = image(None);
        assert!(
            rust.dockerfile
                .contains("COPY cargo-cutoff.py /usr/local/lib/kiln/cargo-cutoff.py")
        );
        assert_eq!(rust.context[0].0, "cargo-cutoff.py");
    }
}
