//! The checkout on the host: a candidate's base commit cloned from the mirror cache (or
//! borrowing the mirror's objects), its submodules fetched where they can be, and packed for a
//! container. `kiln check-images --rebuild` packs its Dockerfile contexts the same way
//! ([`packed_checkout`]).

use std::path::Path;

use kiln_core::runtime::WORKDIR;
use kiln_schema::FailureClass;

use super::error::LaunchError;
use crate::repo;
use crate::request::LaunchRequest;
use crate::verify::Failure;

/// How the host checks the repository out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checkout {
    /// A checkout that reads its objects from the mirror ([`kiln_git::borrow_at`]): seconds
    /// where copying a long history takes many, and enough to plan and to pack the delta an
    /// earlier commit's environment needs. Nothing of it goes to a container whole.
    Borrowed,
    /// A checkout of its own with exactly the base commit's history, packed whole; `reuse`
    /// says whether to look for an environment to start from.
    Whole { reuse: bool },
}

/// A checkout of a base commit in a temporary directory, its submodules fetched where they can
/// be.
pub(super) struct HostCheckout {
    dir: tempfile::TempDir,
    /// What the checkout did beyond a plain clone (tags kept, history cut).
    pub(super) note: Option<String>,
    /// Why the submodules could not be fetched, when they could not.
    submodules: Option<String>,
    /// The mirror's lock, held while a borrowed checkout reads from it.
    _borrowed: Option<kiln_git::Borrowed>,
}

impl HostCheckout {
    pub(super) fn workdir(&self) -> std::path::PathBuf {
        self.dir.path().join("repo")
    }
}

/// Why a checkout could not be made: the host's failure (a temporary directory, a full disk)
/// or git's (the repository's).
enum CheckoutError {
    Host(&'static str, String),
    Git(kiln_git::GitError),
}

/// Checks `commit` of `repo` out of the mirror cache in `cache_dir` (cloned from `url` when
/// missing) as `how` says, and fetches its submodules.
fn host_checkout(
    cache_dir: &Path,
    repo: &str,
    url: &str,
    commit: &str,
    how: Checkout,
) -> Result<HostCheckout, CheckoutError> {
    let dir = tempfile::Builder::new()
        .prefix("kiln-checkout-")
        .tempdir()
        .map_err(|e| {
            CheckoutError::Host(
                "create a temporary directory for the checkout",
                e.to_string(),
            )
        })?;
    let workdir = dir.path().join("repo");
    let mut borrowed = None;
    let note = kiln_git::MirrorCache::new(cache_dir)
        .and_then(|cache| match how {
            Checkout::Borrowed => {
                cache
                    .borrowed_checkout(repo, url, commit, &workdir)
                    .map(|guard| {
                        borrowed = Some(guard);
                        None
                    })
            }
            Checkout::Whole { .. } => cache.checkout(repo, url, commit, &workdir),
        })
        .map_err(CheckoutError::Git)?;
    // Not fatal: the C/C++ planner lets Debian packages stand in for what is missing and says
    // so in the version reason.
    let submodules = kiln_git::init_submodules(&workdir, url);
    Ok(HostCheckout {
        dir,
        note,
        submodules,
        _borrowed: borrowed,
    })
}

/// Checks the candidate's base commit out on the host as `how` says; `Ok(Err(..))` is a
/// failure of the repository.
pub(super) fn check_out(
    request: &LaunchRequest,
    how: Checkout,
) -> Result<Result<HostCheckout, Failure>, LaunchError> {
    let candidate = &request.candidate;
    match host_checkout(
        &request.cache_dir,
        &candidate.repo,
        &request.clone_url,
        &candidate.base_commit,
        how,
    ) {
        Ok(checkout) => {
            if let Some(error) = &checkout.submodules {
                tracing::warn!(instance = %candidate.instance_id, "git submodules not fetched: {error}");
            }
            Ok(Ok(checkout))
        }
        Err(CheckoutError::Host(what, message)) => Err(LaunchError::host(what, message)),
        // A full or read-only disk is the host's failure, not the repository's.
        Err(CheckoutError::Git(e)) if e.is_local_storage_problem() => {
            Err(LaunchError::host("clone the repository", e))
        }
        Err(CheckoutError::Git(e)) => Ok(Err(Failure::new(
            FailureClass::Clone,
            Some(&e.command),
            &e.message,
        ))),
    }
}

/// The whole checkout packed for the container, and what the checkout did beyond a plain
/// clone: what a launch that borrowed its checkout needs once it goes cold.
pub(super) struct Packed {
    pub(super) tar: Vec<u8>,
    pub(super) note: Option<String>,
}

/// Makes and packs the whole checkout ([`Packed`]); `Ok(Err(..))` is a failure of the
/// repository.
pub(super) fn whole_archive(
    request: &LaunchRequest,
) -> Result<Result<Packed, Failure>, LaunchError> {
    let checkout = match check_out(request, Checkout::Whole { reuse: false })? {
        Ok(checkout) => checkout,
        Err(failure) => return Ok(Err(failure)),
    };
    let tar = repo::tar_dir(&checkout.workdir(), WORKDIR.trim_start_matches('/'))
        .map_err(|e| LaunchError::host("pack the checkout", e))?;
    Ok(Ok(Packed {
        tar,
        note: checkout.note,
    }))
}

/// A checkout packed for a build context.
#[derive(Debug, Clone)]
pub struct PackedCheckout {
    /// The tar archive, its entries under the prefix asked for.
    pub tar: Vec<u8>,
    /// Why the submodules are missing, when they could not be fetched.
    pub submodules: Option<String>,
}

/// Checks `commit` of `repo` out as launch does (the mirror cache in `cache_dir`, cloned from
/// `url` when missing; submodules fetched where they can be) and packs it with its entries under
/// `prefix`; blocking. What `kiln check-images --rebuild` builds a row's Dockerfile from.
///
/// # Errors
/// What failed, as a message: the clone, the checkout or the packing.
pub fn packed_checkout(
    cache_dir: &Path,
    repo: &str,
    url: &str,
    commit: &str,
    prefix: &str,
) -> Result<PackedCheckout, String> {
    let checkout = host_checkout(
        cache_dir,
        repo,
        url,
        commit,
        Checkout::Whole { reuse: false },
    )
    .map_err(|e| match e {
        CheckoutError::Host(what, message) => format!("{what}: {message}"),
        CheckoutError::Git(e) => format!("clone {url} at {commit}: {}", e.message),
    })?;
    let tar = repo::tar_dir(&checkout.workdir(), prefix)
        .map_err(|e| format!("pack the checkout: {e}"))?;
    Ok(PackedCheckout {
        tar,
        submodules: checkout
            .submodules
            .map(|error| format!("git submodules not fetched: {error}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_checkout_holds_the_commit_under_the_prefix() {
        let tmp = crate::testutil::tree(&[("src/a.py", "a = 1\n"), ("README", "r\n")]);
        let repo = tmp.path();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["-c", "user.name=k", "-c", "user.email=k@k"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        git(&["init", "-q", "."]);
        git(&["add", "-A"]);
        git(&["commit", "-qm", "base"]);
        let commit = git(&["rev-parse", "HEAD"]);
        let cache = tempfile::tempdir().unwrap();
        let packed = packed_checkout(
            cache.path(),
            "o/r",
            &repo.display().to_string(),
            &commit,
            "context",
        )
        .unwrap();
        assert_eq!(packed.submodules, None);
        let mut archive = tar::Archive::new(packed.tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert!(names.contains(&"context/src/a.py".to_string()), "{names:?}");
        assert!(
            names.iter().any(|n| n.starts_with("context/.git")),
            "{names:?}"
        );
        let missing = packed_checkout(cache.path(), "o/r", "/nowhere", &commit, "x");
        assert!(missing.is_err());
    }
}
