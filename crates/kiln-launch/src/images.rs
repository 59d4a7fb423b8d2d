//! kiln's base images: Dockerfiles kept in this crate, and the CA bundle of a site behind a
//! TLS-inspecting proxy.

use std::fmt::Write as _;

use kiln_core::{ContainerRuntime, ImageBuild, OutputSink, RuntimeError};
use sha2::{Digest, Sha256};

/// Dockerfile of the Python image (Debian bookworm's Python 3.11, plus uv).
pub const PYTHON_DOCKERFILE: &str = include_str!("../images/python.Dockerfile");

/// Dockerfile of the Rust image (Debian trixie's Rust 1.85).
pub const RUST_DOCKERFILE: &str = include_str!("../images/rust.Dockerfile");

/// kiln's script that moves a generated `Cargo.lock` to crates published before a date; the
/// Rust image holds it at [`CARGO_CUTOFF_PATH`].
pub const CARGO_CUTOFF_SCRIPT: &str = include_str!("../images/cargo-cutoff.py");

/// Where the Rust image holds [`CARGO_CUTOFF_SCRIPT`].
pub const CARGO_CUTOFF_PATH: &str = "/usr/local/lib/kiln/cargo-cutoff.py";

/// Dockerfile of the Node image (`ARG SUITE` picks Debian's Node 18 or 20).
pub const NODE_DOCKERFILE: &str = include_str!("../images/node.Dockerfile");

/// Dockerfile of the Node image for other majors: an official build from the npm registry
/// (`ARG NODE_VERSION`, `ARG NPM_VERSION`, `ARG REGISTRY`).
pub const NODE_OFFICIAL_DOCKERFILE: &str = include_str!("../images/node-official.Dockerfile");

/// The registry the official Node builds come from.
pub const NPM_REGISTRY: &str = "https://registry.npmjs.org";

/// Dockerfile of the Go image (`ARG SUITE` picks Debian's Go 1.19 or 1.24).
pub const GO_DOCKERFILE: &str = include_str!("../images/go.Dockerfile");

/// Dockerfile of the C/C++ image (Debian bookworm's GCC 12, CMake, Meson, autotools).
pub const CPP_DOCKERFILE: &str = include_str!("../images/cpp.Dockerfile");

/// Dockerfile of the Java image (`ARG SUITE` and `ARG JDK` pick OpenJDK 17 or 21, plus Maven).
pub const JAVA_DOCKERFILE: &str = include_str!("../images/java.Dockerfile");

/// Line of a Dockerfile that [`with_ca_bundle`] replaces: after the apt step that installs
/// `ca-certificates`, before the first HTTPS download.
pub const CA_BUNDLE_MARKER: &str = "# kiln:ca-bundle";

/// Where the extra CA bundle goes, in the build context and in the image.
const CA_CONTEXT_PATH: &str = "kiln-extra.crt";
const CA_IMAGE_PATH: &str = "/usr/local/share/ca-certificates/kiln-extra.crt";

/// The system bundle that `update-ca-certificates` writes, extra CAs included.
pub const SYSTEM_CA_FILE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// Variables pointing tools at [`SYSTEM_CA_FILE`] instead of their own bundles.
pub const CA_ENV_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CARGO_HTTP_CAINFO",
    "GIT_SSL_CAINFO",
];

/// The Python 3.11 image (`kiln/python:3.11-<hash>`, Debian bookworm), with `ca_bundle` (PEM)
/// installed if given.
#[must_use]
pub fn python_image(ca_bundle: Option<&[u8]>) -> ImageBuild {
    python_image_on(Suite::Bookworm, ca_bundle)
}

/// The Python image of `suite` (bullseye: Python 3.9, bookworm: 3.11, trixie: 3.13).
#[must_use]
pub fn python_image_on(suite: Suite, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let version = match suite {
        Suite::Bullseye => "3.9",
        Suite::Bookworm => "3.11",
        Suite::Trixie => "3.13",
    };
    let dockerfile = with_arg(PYTHON_DOCKERFILE, "SUITE", suite.name());
    image(dockerfile, "python", version, ca_bundle)
}

/// A Debian release that kiln's images start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Debian 11 (only the Python 3.9 image is built on it; `scripts/base-images.sh bullseye`
    /// makes its base image).
    Bullseye,
    /// Debian 12.
    Bookworm,
    /// Debian 13.
    Trixie,
}

impl Suite {
    /// The suite's code name, as in `debian:<name>`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Bullseye => "bullseye",
            Self::Bookworm => "bookworm",
            Self::Trixie => "trixie",
        }
    }
}

/// Sets the default of `ARG <name>=...` in a Dockerfile. The engine API kiln uses takes no build
/// arguments, and the default is part of the text that [`tagged`] hashes, so each value gets
/// its own tag.
fn with_arg(dockerfile: &str, name: &str, value: &str) -> String {
    let prefix = format!("ARG {name}=");
    let mut out = String::new();
    for line in dockerfile.lines() {
        if line.starts_with(&prefix) {
            out.push_str(&prefix);
            out.push_str(value);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// One of kiln's images: `dockerfile` with the CA bundle, labelled and tagged
/// `kiln/<name>:<version>-<hash>`.
fn image(dockerfile: String, name: &str, version: &str, ca_bundle: Option<&[u8]>) -> ImageBuild {
    image_with(dockerfile, Vec::new(), name, version, ca_bundle)
}

/// [`image`] with extra files in the build context.
fn image_with(
    dockerfile: String,
    context: Vec<(String, Vec<u8>)>,
    name: &str,
    version: &str,
    ca_bundle: Option<&[u8]>,
) -> ImageBuild {
    let build = ImageBuild {
        tag: String::new(),
        dockerfile,
        context,
        context_archive: Vec::new(),
        labels: [("kiln.image".to_string(), name.to_string())].into(),
    };
    tagged(
        with_ca_bundle(build, ca_bundle),
        &format!("kiln/{name}"),
        version,
    )
}

/// The Rust image (`kiln/rust:1.85-<hash>`): Debian trixie's rustc and cargo.
#[must_use]
pub fn rust_image(ca_bundle: Option<&[u8]>) -> ImageBuild {
    let script = (
        "cargo-cutoff.py".to_string(),
        CARGO_CUTOFF_SCRIPT.as_bytes().to_vec(),
    );
    image_with(
        RUST_DOCKERFILE.to_string(),
        vec![script],
        "rust",
        "1.85",
        ca_bundle,
    )
}

/// The Node image of `release`: Debian's `nodejs` for 18 (bookworm) and 20 (trixie), an
/// official build otherwise; tagged `kiln/node:<major>-<hash>`.
#[must_use]
pub fn node_image(release: &crate::node::version::Release, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let dockerfile = match release.debian {
        Some(suite) => with_arg(NODE_DOCKERFILE, "SUITE", suite.name()),
        None => {
            let file = with_arg(
                NODE_OFFICIAL_DOCKERFILE,
                "NODE_VERSION",
                &release.version_string(),
            );
            let file = with_arg(&file, "NPM_VERSION", release.npm);
            with_arg(&file, "REGISTRY", NPM_REGISTRY)
        }
    };
    image(dockerfile, "node", &release.major.to_string(), ca_bundle)
}

/// The Go image of `suite` (bookworm: Go 1.19, trixie: Go 1.24), tagged `kiln/go:<version>-<hash>`.
#[must_use]
pub fn go_image(suite: Suite, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let version = match suite {
        Suite::Bullseye => "1.15",
        Suite::Bookworm => "1.19",
        Suite::Trixie => "1.24",
    };
    let dockerfile = with_arg(GO_DOCKERFILE, "SUITE", suite.name());
    image(dockerfile, "go", version, ca_bundle)
}

/// The C/C++ image (`kiln/cpp:bookworm-<hash>`).
#[must_use]
pub fn cpp_image(ca_bundle: Option<&[u8]>) -> ImageBuild {
    image(CPP_DOCKERFILE.to_string(), "cpp", "bookworm", ca_bundle)
}

/// The Java image for OpenJDK `jdk` (17 on bookworm, 21 on trixie; anything newer than 17
/// gets 21), tagged `kiln/java:<jdk>-<hash>`.
#[must_use]
pub fn java_image(jdk: u32, ca_bundle: Option<&[u8]>) -> ImageBuild {
    let (suite, jdk) = if jdk > 17 {
        (Suite::Trixie, 21)
    } else {
        (Suite::Bookworm, 17)
    };
    let dockerfile = with_arg(JAVA_DOCKERFILE, "SUITE", suite.name());
    let dockerfile = with_arg(&dockerfile, "JDK", &jdk.to_string());
    image(dockerfile, "java", &jdk.to_string(), ca_bundle)
}

/// Installs a PEM CA bundle into the image: copied under `/usr/local/share/ca-certificates/`
/// and merged by `update-ca-certificates`, with the usual variables pointing at the merged
/// system bundle.
///
/// The instructions replace the [`CA_BUNDLE_MARKER`] line, which must come after apt installs
/// `ca-certificates` (installing or upgrading that package regenerates the system bundle; CAs
/// under `/usr/local/share/ca-certificates/` survive that, a bundle copied over the file does
/// not) and before anything downloads over HTTPS. Without the marker they are appended. `None`
/// leaves the build unchanged. The tag is not changed: call [`tagged`] after this.
#[must_use]
pub fn with_ca_bundle(mut build: ImageBuild, bundle: Option<&[u8]>) -> ImageBuild {
    let Some(bundle) = bundle else {
        return build;
    };
    let mut block = format!(
        "COPY {CA_CONTEXT_PATH} {CA_IMAGE_PATH}\nRUN update-ca-certificates\nENV UV_SYSTEM_CERTS=1"
    );
    for var in CA_ENV_VARS {
        let _ = write!(block, " \\\n    {var}={SYSTEM_CA_FILE}");
    }
    block.push('\n');
    let lines: Vec<&str> = build.dockerfile.lines().collect();
    build.dockerfile = if lines.iter().any(|l| l.trim() == CA_BUNDLE_MARKER) {
        let mut out = String::new();
        for line in lines {
            if line.trim() == CA_BUNDLE_MARKER {
                out.push_str(&block);
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    } else {
        format!("{}\n{block}", build.dockerfile.trim_end())
    };
    build
        .context
        .push((CA_CONTEXT_PATH.to_string(), bundle.to_vec()));
    build
}

/// Sets the build's tag to `<repo>:<version>-<hash8>`, the hash covering the Dockerfile, the
/// context and the labels, so that any change gives a new tag and [`ensure_image`] rebuilds.
#[must_use]
pub fn tagged(mut build: ImageBuild, repo: &str, version: &str) -> ImageBuild {
    let mut hash = Sha256::new();
    // Lengths are hashed too, so that moving bytes between fields changes the hash.
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    field(build.dockerfile.as_bytes());
    let mut context: Vec<_> = build.context.iter().collect();
    context.sort();
    for (path, contents) in context {
        field(path.as_bytes());
        field(contents);
    }
    field(&build.context_archive);
    for (key, value) in &build.labels {
        field(key.as_bytes());
        field(value.as_bytes());
    }
    let digest = hash.finalize();
    let mut short = String::new();
    for byte in &digest[..4] {
        let _ = write!(short, "{byte:02x}");
    }
    build.tag = format!("{repo}:{version}-{short}");
    build
}

/// Builds `build` unless its tag exists already. Returns whether it built.
///
/// # Errors
/// The runtime's errors; [`RuntimeError::Build`] when the build fails.
pub async fn ensure_image(
    runtime: &dyn ContainerRuntime,
    build: &ImageBuild,
    on_output: OutputSink<'_>,
) -> Result<bool, RuntimeError> {
    if runtime.image_exists(&build.tag).await? {
        return Ok(false);
    }
    tracing::info!(image = %build.tag, "building image");
    let base = base_image(&build.dockerfile);
    let mut base_missing = match &base {
        Some(base) => !runtime.image_exists(base).await?,
        None => false,
    };
    // A Debian base is pulled, or made with debootstrap where no registry answers.
    if let Some(base) = base
        .as_deref()
        .filter(|b| base_missing && crate::debian::suite_of(b).is_some())
    {
        crate::debian::ensure(runtime, base, on_output).await?;
        base_missing = false;
    }
    match runtime.build_image(build, on_output).await {
        // The engine pulls a missing base where a registry is reachable; where none is, say
        // how to make it.
        Err(RuntimeError::Build { image, message }) if base_missing => {
            let base = base.unwrap_or_default();
            let suite = base.strip_prefix("debian:").unwrap_or(&base);
            Err(RuntimeError::Build {
                image,
                message: format!(
                    "base image {base} is not in the engine and could not be pulled; make it with `scripts/base-images.sh {suite}` (debootstrap + docker import)\n{message}"
                ),
            })
        }
        other => other.map(|()| true),
    }
}

/// The image of a Dockerfile's first `FROM`, with `${ARG}` filled from the `ARG` defaults
/// above it.
pub(crate) fn base_image(dockerfile: &str) -> Option<String> {
    let mut args: Vec<(String, String)> = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        if let Some(arg) = line.strip_prefix("ARG ")
            && let Some((name, value)) = arg.split_once('=')
        {
            args.push((name.trim().to_string(), value.trim().to_string()));
        } else if let Some(from) = line.strip_prefix("FROM ") {
            let mut image = from.split_whitespace().next()?.to_string();
            for (name, value) in &args {
                image = image.replace(&format!("${{{name}}}"), value);
            }
            return Some(image);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{CA_BUNDLE_MARKER, PYTHON_DOCKERFILE, python_image, with_ca_bundle};
    use kiln_core::ImageBuild;

    #[test]
    fn the_bundle_is_installed_after_apt_and_before_uv() {
        let build = python_image(Some(b"PEM"));
        let file = &build.dockerfile;
        let apt = file.find("ca-certificates procps").unwrap_or(usize::MAX);
        let update = file.find("RUN update-ca-certificates").unwrap_or(0);
        let uv = file.find("pip install --no-cache-dir uv==").unwrap_or(0);
        assert!(apt < update && update < uv, "{file}");
        assert!(!file.contains(CA_BUNDLE_MARKER));
        assert!(file.contains("PIP_CERT=/etc/ssl/certs/ca-certificates.crt"));
        assert!(file.contains("UV_SYSTEM_CERTS=1"));
        assert_eq!(
            build.context,
            vec![("kiln-extra.crt".to_string(), b"PEM".to_vec())]
        );
    }

    #[test]
    fn tags_change_with_the_bundle_and_not_otherwise() {
        let plain = python_image(None);
        assert!(plain.tag.starts_with("kiln/python:3.11-"), "{}", plain.tag);
        assert_eq!(plain.tag.len(), "kiln/python:3.11-".len() + 8);
        assert_eq!(plain.tag, python_image(None).tag);
        assert_eq!(plain.dockerfile, PYTHON_DOCKERFILE);
        let a = python_image(Some(b"A"));
        assert_ne!(a.tag, plain.tag);
        assert_ne!(a.tag, python_image(Some(b"B")).tag);
        assert_eq!(a.tag, python_image(Some(b"A")).tag);
    }

    #[test]
    fn every_image_installs_the_bundle_after_apt_and_gets_its_own_tag() {
        use super::{Suite, cpp_image, go_image, java_image, node_image, rust_image};
        let release = |major| {
            crate::node::version::release(major).unwrap_or_else(|| panic!("no Node {major}"))
        };
        let images = [
            rust_image(Some(b"PEM")),
            node_image(release(18), Some(b"PEM")),
            node_image(release(20), Some(b"PEM")),
            go_image(Suite::Bookworm, Some(b"PEM")),
            go_image(Suite::Trixie, Some(b"PEM")),
            cpp_image(Some(b"PEM")),
            java_image(11, Some(b"PEM")),
            java_image(21, Some(b"PEM")),
            node_image(release(14), Some(b"PEM")),
        ];
        for build in &images {
            let file = &build.dockerfile;
            let apt = file.find("apt-get install").unwrap_or(usize::MAX);
            let update = file.find("RUN update-ca-certificates").unwrap_or(0);
            assert!(apt < update, "{file}");
            assert!(!file.contains(CA_BUNDLE_MARKER));
        }
        let mut tags: Vec<&str> = images.iter().map(|b| b.tag.as_str()).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), images.len(), "{tags:?}");
        assert!(images[2].tag.starts_with("kiln/node:20-"));
        assert!(images[2].dockerfile.contains("ARG SUITE=trixie\n"));
        assert!(images[7].dockerfile.contains("ARG JDK=21\n"));
        assert!(images[6].tag.starts_with("kiln/java:17-"));
        assert!(images[8].tag.starts_with("kiln/node:14-"));
        for arg in [
            "ARG NODE_VERSION=14.21.3\n",
            "ARG NPM_VERSION=6.14.18\n",
            "ARG REGISTRY=https://registry.npmjs.org\n",
        ] {
            assert!(
                images[8].dockerfile.contains(arg),
                "{}",
                images[8].dockerfile
            );
        }
    }

    #[test]
    fn the_cargo_cutoff_script_passes_its_self_test() {
        // The script runs inside the Rust image; its pure parts (version order, caret
        // compatibility, index paths, lock rewriting) are checked here with the host's Python.
        let out = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/images/cargo-cutoff.py"
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
        let rust = super::rust_image(None);
        assert!(
            rust.dockerfile
                .contains("COPY cargo-cutoff.py /usr/local/lib/kiln/cargo-cutoff.py")
        );
        assert_eq!(rust.context[0].0, "cargo-cutoff.py");
    }

    #[test]
    fn the_base_image_is_read_with_its_arguments() {
        use super::{Suite, base_image, python_image_on};
        assert_eq!(
            base_image(&python_image_on(Suite::Bullseye, None).dockerfile).as_deref(),
            Some("debian:bullseye")
        );
        assert_eq!(
            base_image("# c\nFROM debian:trixie AS build\nRUN x\n").as_deref(),
            Some("debian:trixie")
        );
        assert_eq!(base_image("RUN x\n"), None);
    }

    #[test]
    fn without_a_marker_the_bundle_is_appended() {
        let build = ImageBuild {
            dockerfile: "FROM x\nRUN true\n".to_string(),
            ..ImageBuild::default()
        };
        let build = with_ca_bundle(build, Some(b"PEM"));
        assert!(
            build
                .dockerfile
                .starts_with("FROM x\nRUN true\nCOPY kiln-extra.crt")
        );
    }
}
