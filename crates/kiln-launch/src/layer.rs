//! The system layer of a cold launch: what a plan's first steps add to the base image without
//! reading the checkout (git's setup, the Debian packages the project needs), committed once
//! as an image of its own, `kiln/layer:<hash>`. Every cold launch with the same base image and
//! the same first steps starts from it: those packages are stored once, under the instances'
//! own layers, and installed once. The hash covers the base image's id and the steps'
//! commands, so a rebuilt base image or another package list makes another layer.
//!
//! The layer changes where the steps run, not what the environment is: the row still lists
//! them among its setup commands, and its Dockerfile runs them as before.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kiln_core::runtime::{LABEL_MANAGED, LABEL_RUN};
use kiln_core::{ContainerRuntime, ContainerSpec, RuntimeError, Session};
use sha2::{Digest, Sha256};

use crate::steps::Step;

/// The name every system layer's tag starts with (`kiln gc` knows them by it).
pub const PREFIX: &str = "kiln/layer:";

/// How many of `setup`'s first steps go into a system layer: the leading steps that read
/// nothing of the checkout, when one of them installs packages (git's setup alone is not
/// worth an image).
#[must_use]
pub(crate) fn system_steps(setup: &[Step]) -> usize {
    let count = setup.iter().take_while(|s| s.reads_no_checkout()).count();
    let packages = setup[..count]
        .iter()
        .any(|s| matches!(s, Step::Apt(_) | Step::AptHints(_)));
    if packages { count } else { 0 }
}

/// The tag of the layer that `commands` (rendered steps) make on the image `base_id`.
#[must_use]
pub fn tag<S: AsRef<str>>(base_id: &str, commands: &[S]) -> String {
    let mut hash = Sha256::new();
    // Lengths are hashed too, so that moving text between commands changes the hash.
    for text in std::iter::once(base_id).chain(commands.iter().map(AsRef::as_ref)) {
        hash.update((text.len() as u64).to_le_bytes());
        hash.update(text.as_bytes());
    }
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// The layer of `steps` on `spec`'s image, built unless it exists; `None` when a step failed
/// (the launch then runs the steps itself, where the repair rules can act on them) or the base
/// image is gone. The layer is built in a container like `spec`, without its dataset's label:
/// a layer belongs to no dataset (`kiln gc` removes it once no image is made from it). Builds
/// are serialised, so that launches that want the same layer build it once.
///
/// # Errors
/// When the engine fails.
pub(crate) async fn ensure(
    runtime: &Arc<dyn ContainerRuntime>,
    spec: &ContainerSpec,
    steps: &[Step],
    timeout: Duration,
    log: &Path,
) -> Result<Option<String>, RuntimeError> {
    static BUILDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let Some(base_id) = runtime.image_id(&spec.image).await? else {
        return Ok(None);
    };
    let commands: Vec<String> = steps.iter().map(Step::render).collect();
    let tag = tag(&base_id, &commands);
    // A launch that finds its layer does not wait for another layer's build.
    if runtime.image_exists(&tag).await? {
        return Ok(Some(tag));
    }
    let _guard = BUILDS.lock().await;
    if runtime.image_exists(&tag).await? {
        return Ok(Some(tag));
    }
    let spec = ContainerSpec {
        labels: spec
            .labels
            .iter()
            .filter(|(k, _)| [LABEL_MANAGED, LABEL_RUN].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..spec.clone()
    };
    let mut session = Session::start(Arc::clone(runtime), &spec, log).await?;
    for step in steps {
        let outcome = session.run(&step.render(), timeout).await?;
        if outcome.exit_code != 0 || outcome.timed_out {
            session.note("# the layer is not made: the launch runs these steps itself");
            session.close().await?;
            return Ok(None);
        }
    }
    let labels = BTreeMap::from([(LABEL_MANAGED.to_string(), "1".to_string())]);
    session.commit(&tag, &labels).await?;
    session.close().await?;
    Ok(Some(tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_holds_the_leading_steps_that_read_no_checkout_when_they_install_packages() {
        let apt = Step::apt(&["libxml2-dev"]).unwrap();
        let install = Step::shell("pip install -e .");
        assert_eq!(
            system_steps(&[Step::git_setup(), apt.clone(), install.clone()]),
            2
        );
        assert_eq!(system_steps(&[Step::git_setup(), install.clone()]), 0);
        assert_eq!(system_steps(&[install.clone(), apt.clone()]), 0);
        assert_eq!(system_steps(&[]), 0);
    }

    #[test]
    fn a_layer_is_named_by_its_base_image_and_its_commands() {
        let one = tag("sha256:aa", &["git config", "apt-get install libpq-dev"]);
        assert!(
            one.starts_with(PREFIX) && one.len() == PREFIX.len() + 16,
            "{one}"
        );
        assert_eq!(
            one,
            tag("sha256:aa", &["git config", "apt-get install libpq-dev"])
        );
        assert_ne!(
            one,
            tag("sha256:bb", &["git config", "apt-get install libpq-dev"])
        );
        assert_ne!(
            one,
            tag("sha256:aa", &["git config", "apt-get install libxml2-dev"])
        );
        assert_ne!(
            one,
            tag("sha256:aa", &["git config apt-get", "install libpq-dev"])
        );
    }
}
