//! Debian base images (`debian:<suite>`) that the engine lacks: pulled where a registry
//! answers, otherwise made here from Debian's packages with `debootstrap` and imported into the
//! engine (`docker import`), as `scripts/base-images.sh` does. Without this, a machine that
//! reaches no registry lost every instance of an image it had not prepared by hand.
//!
//! debootstrap runs on the host, as root (it installs it with apt when it is missing); the
//! root file system is removed afterwards without crossing into any file system mounted
//! inside it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use kiln_core::{ContainerRuntime, OutputSink, RuntimeError};

/// The mirror debootstrap downloads from, unless `KILN_DEBIAN_MIRROR` says otherwise.
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The suites kiln's images start from.
pub const SUITES: &[&str] = &["bullseye", "bookworm", "trixie"];

/// A Debian release that kiln's images start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// Debian 11 (`scripts/base-images.sh bullseye` makes its base image).
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

/// The suite of a `debian:<suite>` image kiln can make, or `None`.
#[must_use]
pub fn suite_of(image: &str) -> Option<&'static str> {
    let suite = image.strip_prefix("debian:")?;
    SUITES.iter().copied().find(|s| *s == suite)
}

/// How the image came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// It was there.
    Present,
    /// Pulled from a registry.
    Pulled,
    /// Made with debootstrap.
    Bootstrapped,
}

/// Makes sure `image` (a `debian:<suite>` of [`SUITES`]) exists in the engine, as `tag`.
///
/// # Errors
/// [`RuntimeError::Build`] when it can be neither pulled nor made, saying why; engine errors.
pub async fn ensure(
    runtime: &dyn ContainerRuntime,
    image: &str,
    on_output: OutputSink<'_>,
) -> Result<Made, RuntimeError> {
    ensure_as(runtime, image, image, on_output).await
}

/// [`ensure`], importing a bootstrapped image under `tag` (tests use a tag of their own).
///
/// # Errors
/// See [`ensure`].
pub async fn ensure_as(
    runtime: &dyn ContainerRuntime,
    image: &str,
    tag: &str,
    on_output: OutputSink<'_>,
) -> Result<Made, RuntimeError> {
    if runtime.image_exists(tag).await? {
        return Ok(Made::Present);
    }
    let fail = |message: String| RuntimeError::Build {
        image: tag.to_string(),
        message,
    };
    let suite =
        suite_of(image).ok_or_else(|| fail(format!("{image} is not a Debian suite kiln makes")))?;
    if tag == image && runtime.pull_image(image, on_output).await? {
        return Ok(Made::Pulled);
    }
    let mirror = std::env::var("KILN_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.into());
    say(
        on_output,
        &format!(
            "{image} cannot be pulled: making it with debootstrap from {mirror} (a few minutes, once)"
        ),
    );
    tracing::info!(image, mirror, "making the base image with debootstrap");
    let started = Instant::now();
    let work =
        Workdir::new(suite).map_err(|e| fail(format!("create a temporary directory: {e}")))?;
    let result = bootstrap(suite, &mirror, &work, tag, runtime, on_output).await;
    drop(work);
    result.map_err(|message| {
        fail(format!(
            "{message}\n(kiln makes missing Debian images with debootstrap as root; elsewhere run `scripts/base-images.sh {suite}` once)"
        ))
    })?;
    say(
        on_output,
        &format!("{tag} made in {:.0}s", started.elapsed().as_secs_f64()),
    );
    Ok(Made::Bootstrapped)
}

fn say(on_output: OutputSink<'_>, line: &str) {
    on_output(format!("[kiln] {line}\n").as_bytes());
}

async fn bootstrap(
    suite: &str,
    mirror: &str,
    work: &Workdir,
    tag: &str,
    runtime: &dyn ContainerRuntime,
    on_output: OutputSink<'_>,
) -> Result<(), String> {
    if !on_path("debootstrap") {
        if !on_path("apt-get") {
            return Err(
                "debootstrap is not installed and there is no apt-get to install it".into(),
            );
        }
        say(on_output, "installing debootstrap");
        run(
            "sh",
            &[
                "-c",
                "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap debian-archive-keyring",
            ],
            on_output,
        )
        .await?;
    }
    let rootfs = work.path.join("rootfs");
    let rootfs_arg = rootfs.to_string_lossy().into_owned();
    run(
        "debootstrap",
        &["--variant=minbase", suite, &rootfs_arg, mirror],
        on_output,
    )
    .await?;
    // Downloaded packages and indexes only make the image bigger; images run apt-get update.
    for dir in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        if let Ok(entries) = std::fs::read_dir(rootfs.join(dir)) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_file()) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
    }
    let archive = work.path.join("rootfs.tar");
    let archive_arg = archive.to_string_lossy().into_owned();
    run(
        "tar",
        &[
            "-C",
            &rootfs_arg,
            "--numeric-owner",
            "-cf",
            &archive_arg,
            ".",
        ],
        on_output,
    )
    .await?;
    say(
        on_output,
        &format!("importing the root file system as {tag}"),
    );
    runtime
        .import_image(
            tag,
            &archive,
            &["CMD [\"bash\"]".to_string(), "ENV LANG=C.UTF-8".to_string()],
        )
        .await
        .map_err(|e| e.to_string())
}

/// Whether `program` is an executable file in a `PATH` directory (or an sbin directory, which
/// a non-login root shell may leave out).
fn on_path(program: &str) -> bool {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin"])
        .any(|dir| Path::new(dir).join(program).is_file())
}

/// Runs a host command, its output to `on_output`; the error names it and its exit status.
async fn run(program: &str, args: &[&str], on_output: OutputSink<'_>) -> Result<(), String> {
    let program_path = ["/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(program));
    let output = tokio::process::Command::new(&program_path)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .map_err(|e| format!("run {program}: {e}"))?;
    on_output(&output.stdout);
    on_output(&output.stderr);
    if output.status.success() {
        Ok(())
    } else {
        let tail = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = tail.lines().rev().take(5).collect();
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ))
    }
}

/// A temporary directory for one bootstrap, removed on drop: mounts debootstrap left inside
/// it (`/proc`, `/sys` after a failure) are unmounted first, and the removal stays on one
/// file system, so it can never reach the host's.
struct Workdir {
    path: PathBuf,
}

impl Workdir {
    fn new(suite: &str) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "kiln-rootfs-{suite}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let prefix = format!("{}/", self.path.display());
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|m| m.starts_with(&prefix))
            .map(str::to_string)
            .collect();
        mounts.sort_unstable_by(|a, b| b.cmp(a));
        for mount in mounts {
            let _ = std::process::Command::new("umount")
                .args(["-l", &mount])
                .status();
        }
        let _ = std::process::Command::new("rm")
            .args(["-rf", "--one-file-system"])
            .arg(&self.path)
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_suites_kiln_uses_are_made() {
        assert_eq!(suite_of("debian:trixie"), Some("trixie"));
        assert_eq!(suite_of("debian:sid"), None);
        assert_eq!(suite_of("ubuntu:22.04"), None);
    }

    #[test]
    fn the_work_directory_goes_away() {
        let work = Workdir::new("test").unwrap();
        std::fs::create_dir_all(work.path.join("rootfs/etc")).unwrap();
        let path = work.path.clone();
        drop(work);
        assert!(!path.exists());
    }
}
