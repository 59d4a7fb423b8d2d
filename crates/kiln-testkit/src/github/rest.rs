//! REST answers of the fake, in the shapes of GitHub's OpenAPI description (checked in CI
//! against `@octokit/openapi`'s `full-repository` and `basic-error` schemas).

use serde_json::{Value, json};

use super::model::{FakeRepo, github_time};

/// `GET /repos/{owner}/{repo}`: a `full-repository`. `api` is the fake's own API root, which
/// GitHub puts in every `*_url` field.
#[must_use]
pub fn full_repository(repo: &FakeRepo, api: &str) -> Value {
    let full = &repo.full_name;
    let repo_api = format!("{api}/repos/{full}");
    let owner = repo.owner();
    let user_api = format!("{api}/users/{owner}");
    let owner_json = json!({
        "login": owner,
        "id": repo.id + 1_000_000,
        "node_id": format!("O_kgDO{:08}", repo.id),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{}?v=4", repo.id + 1_000_000),
        "gravatar_id": "",
        "url": user_api,
        "html_url": format!("https://github.com/{owner}"),
        "followers_url": format!("{user_api}/followers"),
        "following_url": format!("{user_api}/following{{/other_user}}"),
        "gists_url": format!("{user_api}/gists{{/gist_id}}"),
        "starred_url": format!("{user_api}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{user_api}/subscriptions"),
        "organizations_url": format!("{user_api}/orgs"),
        "repos_url": format!("{user_api}/repos"),
        "events_url": format!("{user_api}/events{{/privacy}}"),
        "received_events_url": format!("{user_api}/received_events"),
        "type": "Organization",
        "user_view_type": "public",
        "site_admin": false
    });
    // Two halves: one `json!` of every field exceeds the macro's recursion limit.
    let mut value = json!({
        "id": repo.id,
        "node_id": format!("R_kgDO{:08}", repo.id),
        "name": repo.name(),
        "full_name": full,
        "private": false,
        "owner": owner_json,
        "html_url": format!("https://github.com/{full}"),
        "description": format!("{} (a kiln fixture)", repo.name()),
        "fork": repo.fork,
        "url": repo_api,
        "created_at": github_time(&repo.created_at),
        "updated_at": github_time(&repo.pushed_at),
        "pushed_at": github_time(&repo.pushed_at),
        "git_url": format!("git://github.com/{full}.git"),
        "ssh_url": format!("git@github.com:{full}.git"),
        "clone_url": format!("https://github.com/{full}.git"),
        "svn_url": format!("https://github.com/{full}"),
        "homepage": null,
        "size": repo.languages.iter().map(|(_, s)| s).sum::<u64>() / 1024,
        "stargazers_count": repo.stars,
        "watchers_count": repo.stars,
        "language": repo.language,
        "has_issues": true,
        "has_projects": true,
        "has_downloads": true,
        "has_wiki": true
    });
    let rest = json!({
        "has_pages": false,
        "has_discussions": false,
        "forks_count": repo.forks,
        "mirror_url": null,
        "archived": repo.archived,
        "disabled": false,
        "open_issues_count": 0,
        "license": {
            "key": "mit",
            "name": "MIT License",
            "spdx_id": "MIT",
            "url": format!("{api}/licenses/mit"),
            "node_id": "MDc6TGljZW5zZTEz"
        },
        "allow_forking": true,
        "is_template": false,
        "web_commit_signoff_required": false,
        "topics": [],
        "visibility": "public",
        "forks": repo.forks,
        "open_issues": 0,
        "watchers": repo.stars,
        "default_branch": repo.default_branch,
        "temp_clone_token": null,
        "network_count": repo.forks,
        "subscribers_count": 3
    });
    if let (Some(object), Value::Object(rest)) = (value.as_object_mut(), rest) {
        object.extend(rest);
    }
    // The `*_url` templates of the repository's API resources (hypermedia links GitHub
    // includes in every repository).
    let templates: &[(&str, &str)] = &[
        ("forks_url", "/forks"),
        ("keys_url", "/keys{/key_id}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("teams_url", "/teams"),
        ("hooks_url", "/hooks"),
        ("issue_events_url", "/issues/events{/number}"),
        ("events_url", "/events"),
        ("assignees_url", "/assignees{/user}"),
        ("branches_url", "/branches{/branch}"),
        ("tags_url", "/tags"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("trees_url", "/git/trees{/sha}"),
        ("statuses_url", "/statuses/{sha}"),
        ("languages_url", "/languages"),
        ("stargazers_url", "/stargazers"),
        ("contributors_url", "/contributors"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("commits_url", "/commits{/sha}"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("comments_url", "/comments{/number}"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("contents_url", "/contents/{+path}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("merges_url", "/merges"),
        ("archive_url", "/{archive_format}{/ref}"),
        ("downloads_url", "/downloads"),
        ("issues_url", "/issues{/number}"),
        ("pulls_url", "/pulls{/number}"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("labels_url", "/labels{/name}"),
        ("releases_url", "/releases{/id}"),
        ("deployments_url", "/deployments"),
    ];
    if let Some(object) = value.as_object_mut() {
        for (key, suffix) in templates {
            object.insert(
                (*key).to_string(),
                Value::String(format!("{repo_api}{suffix}")),
            );
        }
    }
    value
}

/// A `basic-error` body, as GitHub sends with 401, 403 and 404.
#[must_use]
pub fn basic_error(message: &str, documentation: &str, status: u16) -> Value {
    json!({
        "message": message,
        "documentation_url": format!("https://docs.github.com/rest{documentation}"),
        "status": status.to_string()
    })
}
