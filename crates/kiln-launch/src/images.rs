//! kiln's base images, whatever the language: a Dockerfile kept in this crate (each ecosystem
//! names its own) with its `ARG` defaults set, the CA bundle of a site behind a
//! TLS-inspecting proxy, a tag that hashes all of it, and the build when the tag is missing.

use std::fmt::Write as _;

use kiln_core::{ContainerRuntime, ImageBuild, OutputSink, RuntimeError};
use sha2::{Digest, Sha256};

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

/// Sets the default of `ARG <name>=...` in a Dockerfile. The engine API kiln uses takes no build
/// arguments, and the default is part of the text that [`tagged`] hashes, so each value gets
/// its own tag.
#[must_use]
pub fn with_arg(dockerfile: &str, name: &str, value: &str) -> String {
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
#[must_use]
pub fn image(
    dockerfile: String,
    name: &str,
    version: &str,
    ca_bundle: Option<&[u8]>,
) -> ImageBuild {
    image_with(dockerfile, Vec::new(), name, version, ca_bundle)
}

/// [`image`] with extra files in the build context.
#[must_use]
pub fn image_with(
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
#[must_use]
pub fn base_image(dockerfile: &str) -> Option<String> {
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
    use super::{CA_BUNDLE_MARKER, base_image, image, with_arg, with_ca_bundle};
    use kiln_core::ImageBuild;

    const DOCKERFILE: &str = "ARG SUITE=bookworm\nFROM debian:${SUITE}\nRUN apt-get update && apt-get install -y ca-certificates\n# kiln:ca-bundle\nRUN curl https://example.org\n";

    #[test]
    fn the_bundle_replaces_the_marker_and_the_tag_follows_the_contents() {
        let plain = image(DOCKERFILE.to_string(), "x", "1", None);
        assert!(plain.tag.starts_with("kiln/x:1-"), "{}", plain.tag);
        assert_eq!(plain.tag.len(), "kiln/x:1-".len() + 8);
        assert_eq!(plain.dockerfile, DOCKERFILE);
        let with = image(DOCKERFILE.to_string(), "x", "1", Some(b"PEM"));
        let file = &with.dockerfile;
        let apt = file.find("apt-get install").unwrap_or(usize::MAX);
        let update = file.find("RUN update-ca-certificates").unwrap_or(0);
        let curl = file.find("RUN curl").unwrap_or(0);
        assert!(apt < update && update < curl, "{file}");
        assert!(!file.contains(CA_BUNDLE_MARKER));
        assert!(file.contains("PIP_CERT=/etc/ssl/certs/ca-certificates.crt"));
        assert_eq!(
            with.context,
            vec![("kiln-extra.crt".to_string(), b"PEM".to_vec())]
        );
        assert_ne!(with.tag, plain.tag);
        assert_ne!(
            with.tag,
            image(DOCKERFILE.to_string(), "x", "1", Some(b"B")).tag
        );
        assert_eq!(plain.tag, image(DOCKERFILE.to_string(), "x", "1", None).tag);
    }

    #[test]
    fn the_base_image_is_read_with_its_arguments() {
        assert_eq!(
            base_image(&with_arg(DOCKERFILE, "SUITE", "bullseye")).as_deref(),
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
