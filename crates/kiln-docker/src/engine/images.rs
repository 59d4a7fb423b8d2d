//! What the image calls share: an image as the engine lists it, a failed build's leftover step
//! images, and the registry credentials a push sends.

use bollard::query_parameters::RemoveImageOptionsBuilder;
use kiln_core::ImageInfo;

use super::client::DockerRuntime;
use super::errors::describe;
use super::names::{content_id, short};

/// An image as the engine lists it.
pub(super) fn image_info(image: bollard::models::ImageSummary) -> ImageInfo {
    ImageInfo {
        id: content_id(image.id),
        tags: image
            .repo_tags
            .into_iter()
            .filter(|t| t != "<none>:<none>")
            .collect(),
        size: image.size,
        created: image.created,
        labels: image.labels.into_iter().collect(),
        parent: if image.parent_id.is_empty() {
            String::new()
        } else {
            content_id(image.parent_id)
        },
    }
}

/// The registry host of an image name (`registry.example.com:5000/team/x` gives
/// `registry.example.com:5000`), or `docker.io` when the first part is no host.
pub(super) fn registry_host(repo: &str) -> &str {
    kiln_core::runtime::registry_of(repo).unwrap_or("docker.io")
}

/// The login `docker login` stored for `host` in the client's config
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): the engine keeps no
/// credentials of its own, so a push sends them. Credential helpers (`credsStore`) are not
/// run; a push needing them fails with the registry's refusal.
pub(super) fn registry_credentials(host: &str) -> Option<bollard::auth::DockerCredentials> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".docker")))?;
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).ok()?).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let entry = auths
        .iter()
        .find(|(key, _)| {
            let key = key
                .trim_start_matches("https://")
                .trim_start_matches("http://");
            key.split('/').next() == Some(host)
        })
        .map(|(_, v)| v)?;
    let auth = entry.get("auth")?.as_str()?;
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some(bollard::auth::DockerCredentials {
        username: Some(user.to_string()),
        password: Some(password.to_string()),
        serveraddress: Some(host.to_string()),
        ..Default::default()
    })
}

impl DockerRuntime {
    /// Removes image `id` if it has no name, with its untagged parents (the layers of a failed
    /// build's finished steps). One in use, tagged meanwhile, or a parent of another image
    /// stays: this only tidies up, so its errors are logged, not returned.
    pub(super) async fn remove_untagged(&self, id: &str) {
        match self.docker.inspect_image(id).await {
            Ok(image) if image.repo_tags.as_ref().is_none_or(Vec::is_empty) => {}
            _ => return,
        }
        let options = RemoveImageOptionsBuilder::new().build();
        if let Err(e) = self.docker.remove_image(id, Some(options), None).await {
            tracing::debug!(image = short(id), error = %describe(&e), "keep a failed build's step image");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::registry_host;

    #[test]
    fn registry_hosts_of_image_names() {
        assert_eq!(registry_host("127.0.0.1:5000/kiln/env"), "127.0.0.1:5000");
        assert_eq!(
            registry_host("registry.example.com/team/x"),
            "registry.example.com"
        );
        assert_eq!(registry_host("localhost/x"), "localhost");
        assert_eq!(registry_host("kiln-env/demo"), "docker.io");
    }
}
