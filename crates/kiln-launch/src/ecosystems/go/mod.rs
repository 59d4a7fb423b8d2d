//! The Go plan: a module (`go.mod`), built on Debian's Go 1.19 (bookworm) or 1.24 (trixie) as
//! its `go` directive asks, tested with `go test -json`.

use std::path::Path;

use kiln_core::ImageBuild;

use super::entry::Entry;
use crate::debian::Suite;
use crate::images;
use crate::plan::{Plan, PlanContext, RepairContext, read};
use crate::steps::{Step, TestCommand};

/// Dockerfile of the Go image (`ARG SUITE` picks Debian's Go 1.19 or 1.24).
pub const DOCKERFILE: &str = include_str!("go.Dockerfile");

/// The Go image of `suite` (bookworm: Go 1.19, trixie: Go 1.24), tagged `kiln/go:<version>-<hash>`.
#[must_use]
pub fn image(suite: Suite, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let version = match suite {
        Suite::Bullseye => "1.15",
        Suite::Bookworm => "1.19",
        Suite::Trixie => "1.24",
    };
    let dockerfile = images::with_arg(DOCKERFILE, "SUITE", suite.name());
    images::image(dockerfile, "go", version, ca_bundle)
}

/// What `go.mod` and the tree say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GoModule {
    /// The `go` directive (`1.21`, `1.22.3`), when present.
    pub go_directive: Option<String>,
    /// The `toolchain` directive, when present.
    pub toolchain: Option<String>,
    /// The module requires other modules.
    pub has_requires: bool,
    /// `vendor/modules.txt` is committed.
    pub vendored: bool,
    /// `go.sum` is committed.
    pub go_sum: bool,
}

/// Reads `go.mod` at the root. `None` when there is none.
#[must_use]
pub fn detect(root: &Path) -> Option<GoModule> {
    let text = read(root, "go.mod")?;
    let mut module = GoModule {
        vendored: root.join("vendor").join("modules.txt").is_file(),
        go_sum: root.join("go.sum").is_file(),
        ..GoModule::default()
    };
    let mut in_require_block = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if in_require_block {
            if line.starts_with(')') {
                in_require_block = false;
            } else if !line.is_empty() {
                module.has_requires = true;
            }
        } else if let Some(version) = line.strip_prefix("go ") {
            module.go_directive = Some(version.trim().to_string());
        } else if let Some(version) = line.strip_prefix("toolchain ") {
            module.toolchain = Some(version.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("require") {
            let rest = rest.trim();
            if rest == "(" {
                in_require_block = true;
            } else if !rest.is_empty() && rest != "()" {
                module.has_requires = true;
            }
        }
    }
    Some(module)
}

/// `(1, minor)` of a `go` directive.
fn go_minor(version: &str) -> Option<u32> {
    let mut parts = version
        .trim()
        .trim_start_matches("go")
        .split(['.', 'r', 'b']);
    if parts.next()? != "1" {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Chooses the image (Go 1.19 on bookworm when the directive allows it, else 1.24 on trixie)
/// and says why.
#[must_use]
pub fn choose_go(module: &GoModule) -> (Suite, String) {
    let Some(directive) = &module.go_directive else {
        return (
            Suite::Trixie,
            "Go 1.24 (Debian trixie): go.mod has no `go` directive".into(),
        );
    };
    match go_minor(directive) {
        Some(minor) if minor <= 19 => (
            Suite::Bookworm,
            format!(
                "Go 1.19 (Debian bookworm): go.mod says `go {directive}`, the oldest configured Go that builds it"
            ),
        ),
        Some(minor) if minor <= 24 => (
            Suite::Trixie,
            format!("Go 1.24 (Debian trixie): go.mod says `go {directive}`, newer than 1.19"),
        ),
        _ => (
            Suite::Trixie,
            format!(
                "Go 1.24 (Debian trixie), the newest configured, though go.mod says `go {directive}`: with GOTOOLCHAIN=local the build is expected to fail"
            ),
        ),
    }
}

/// The Go plan, when the root holds a `go.mod`.
#[must_use]
pub fn plan(cx: &PlanContext<'_>) -> Option<Plan> {
    let module = detect(cx.root)?;
    let (suite, mut version_reason) = choose_go(&module);
    if let Some(toolchain) = &module.toolchain {
        version_reason.push_str(&format!(
            "; toolchain `{toolchain}` is not downloaded (GOTOOLCHAIN=local)"
        ));
    }
    // Vendored modules are used as committed. Without go.sum, `-mod=mod` lets the go command
    // record the sums it downloads instead of refusing to build.
    let flags = if module.vendored {
        "GOFLAGS=-mod=vendor "
    } else if module.has_requires && !module.go_sum {
        "GOFLAGS=-mod=mod "
    } else {
        ""
    };
    let mut setup = vec![Step::git_setup()];
    let resolution = if module.vendored {
        "vendor/ holds every dependency (-mod=vendor)".to_string()
    } else if module.go_sum {
        setup.push(Step::Resolve(format!("{flags}go mod download")));
        "go.mod and go.sum pin every dependency (minimal version selection)".to_string()
    } else if module.has_requires {
        setup.push(Step::Resolve(format!("{flags}go mod download")));
        "go.mod pins every dependency (minimal version selection); no go.sum, so -mod=mod records the sums".to_string()
    } else {
        "no dependencies".to_string()
    };
    // Compiling the test binaries once fills the build cache that the image keeps, so later
    // test runs only rebuild what a patch touches; `-run` matching no test keeps it quick.
    let compile = Step::Shell(format!(
        "{flags}go test -count=1 -run '^KILN_NO_TEST$' ./..."
    ));
    setup.push(compile.clone());
    Some(Plan {
        name: if module.vendored {
            "go-module-vendor"
        } else {
            "go-module"
        }
        .to_string(),
        language: "go",
        image: image(suite, cx.ca_bundle),
        version_reason,
        setup,
        rebuild: vec![compile],
        test: TestCommand::plain(format!("{flags}go test -json -count=1 ./... 2>&1")),
        test_scope: "all".into(),
        whole_test: None,
        collect: None,
        parser: "go-test-json",
        resolution,
        // go.mod states exact minimum versions; there is nothing to resolve as of a date.
        cutoff: None,
        repair: RepairContext::default(),
    })
}

/// Go's line in the registry (modules).
pub(crate) static ENTRY: Entry = Entry {
    name: "go",
    plan,
    rules: &[crate::repair::SYSTEM, crate::repair::LAST],
    interpreter: None,
    // go.sum pins every module a build reads.
    fresh: None,
    // `go mod download` and `go test` may add missing sums and tidy requirements.
    rewrites: &["go.mod", "go.sum"],
    package_index: Some("$(p=${GOPROXY:-https://proxy.golang.org}; echo ${p%%[,|]*})"),
    leave_out: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    #[test]
    fn an_old_module_gets_go_1_19_and_downloads_its_requirements() {
        let plan = plan_of(
            plan,
            &[
                (
                    "go.mod",
                    "module example.com/x\n\ngo 1.18\n\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n)\n",
                ),
                ("go.sum", ""),
            ],
            None,
        )
        .expect("no plan");
        assert!(
            plan.image.tag.starts_with("kiln/go:1.19-"),
            "{}",
            plan.image.tag
        );
        assert!(plan.version_reason.contains("`go 1.18`"));
        assert_eq!(plan.setup[1], "go mod download");
        assert_eq!(plan.test, "go test -json -count=1 ./... 2>&1");
        assert_eq!(plan.parser, "go-test-json");
        assert_eq!(plan.rebuild, [plan.setup[2].clone()]);
    }

    #[test]
    fn vendored_new_and_too_new_modules() {
        let plan = plan_of(
            plan,
            &[
                (
                    "go.mod",
                    "module x\ngo 1.22.1\ntoolchain go1.22.5\nrequire a.b/c v1.0.0\n",
                ),
                ("vendor/modules.txt", "# a.b/c v1.0.0\n"),
            ],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.name, "go-module-vendor");
        assert!(plan.image.tag.starts_with("kiln/go:1.24-"));
        assert!(
            plan.setup
                .iter()
                .all(|c| !c.render().contains("go mod download"))
        );
        assert!(
            plan.test
                .render()
                .starts_with("GOFLAGS=-mod=vendor go test -json")
        );
        assert!(plan.version_reason.contains("toolchain `go1.22.5`"));

        let module = GoModule {
            go_directive: Some("1.25".into()),
            ..GoModule::default()
        };
        assert!(choose_go(&module).1.contains("expected to fail"));

        let plan = plan_of(
            super::plan,
            &[("go.mod", "module x\ngo 1.21\nrequire (\n)\n")],
            None,
        )
        .expect("no plan");
        assert_eq!(plan.resolution, "no dependencies");
        let plan = plan_of(
            super::plan,
            &[("go.mod", "module x\ngo 1.21\nrequire (\n a.b/c v1.0.0\n)\n")],
            None,
        )
        .expect("no plan");
        assert!(
            plan.test.render().starts_with("GOFLAGS=-mod=mod "),
            "{}",
            plan.test
        );
    }
}
