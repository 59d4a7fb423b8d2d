//! The services a repository's CI starts beside its jobs for the tests to talk to: a Redis,
//! PostgreSQL, MySQL/MariaDB or Memcached server, and the credentials it is started with.
//!
//! Read from the forms CI systems give them: a GitHub Actions job's `services:` (each with an
//! `image:` and `env:`), an action that starts one (`uses: supercharge/redis-github-action`),
//! Travis's `services:` list (`- redis-server`, `- postgresql`), GitLab's `services:` images and
//! CircleCI's secondary `- image:` entries. Credentials come from the variables the official
//! images read (`POSTGRES_PASSWORD`, `MYSQL_ROOT_PASSWORD`, ...), wherever the CI sets them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::yaml::{strip_comment, unquote, yaml_files};

/// What kind of server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServiceKind {
    /// Redis (or Valkey, which speaks its protocol).
    Redis,
    /// Memcached.
    Memcached,
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    Mysql,
}

impl ServiceKind {
    /// The name the row gives it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Memcached => "memcached",
            Self::Postgres => "postgresql",
            Self::Mysql => "mysql",
        }
    }
}

/// A service the CI starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The server.
    pub kind: ServiceKind,
    /// The user the tests log in as (databases only; the image's default when the CI names
    /// none: `postgres`, `root`).
    pub user: Option<String>,
    /// Its password (`None`: the CI sets none; `Some("")`: an empty one).
    pub password: Option<String>,
    /// The database the CI has created.
    pub database: Option<String>,
}

/// The kind of server an image, action or Travis service name stands for.
fn kind_of(name: &str) -> Option<ServiceKind> {
    let name = unquote(name.trim()).to_ascii_lowercase();
    // `docker.io/library/postgres:15-alpine`, `supercharge/redis-github-action@1.8.1`.
    let name = name.split(['@', ' ']).next().unwrap_or_default();
    let base = name.rsplit('/').next().unwrap_or(name);
    let base = base.split(':').next().unwrap_or(base);
    if base.contains("redis") || base.contains("valkey") {
        Some(ServiceKind::Redis)
    } else if base.contains("postgres") || base.contains("postgis") {
        Some(ServiceKind::Postgres)
    } else if base.contains("mysql") || base.contains("mariadb") {
        Some(ServiceKind::Mysql)
    } else if base.contains("memcache") {
        Some(ServiceKind::Memcached)
    } else {
        None
    }
}

/// Variables of the official images that say how a database is set up.
const CREDENTIALS: &[&str] = &[
    "POSTGRES_USER",
    "POSTGRES_PASSWORD",
    "POSTGRES_DB",
    "MYSQL_ROOT_PASSWORD",
    "MARIADB_ROOT_PASSWORD",
    "MYSQL_ALLOW_EMPTY_PASSWORD",
    "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD",
    "MYSQL_DATABASE",
    "MARIADB_DATABASE",
    "MYSQL_USER",
    "MARIADB_USER",
    "MYSQL_PASSWORD",
    "MARIADB_PASSWORD",
];

/// A value kiln writes into SQL and a shell command unquoted-safe: letters, digits and
/// `_.-`; an empty value stands for an empty password. Expressions and secrets
/// (`${{ secrets.X }}`, `$X`) are not values.
fn literal(value: &str) -> Option<String> {
    let value = unquote(strip_comment(value.trim()));
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        .then(|| value.to_string())
}

/// The services the CI configuration at `root` starts, one per kind, in kind order.
#[must_use]
pub fn services(root: &Path) -> Vec<Service> {
    let mut kinds: BTreeSet<ServiceKind> = BTreeSet::new();
    let mut values: BTreeMap<&'static str, String> = BTreeMap::new();
    for (_, text) in yaml_files(root) {
        let mut block: Option<usize> = None;
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let indent = line.len() - trimmed.len();
            let item = trimmed.strip_prefix("- ");
            let body = item.unwrap_or(trimmed).trim_start();
            // A `services:` block goes on while lines are deeper, or list items at its level.
            if let Some(at) = block
                && (indent < at || (indent == at && item.is_none()))
            {
                block = None;
            }
            let (key, value) = match body.split_once(':') {
                Some((key, value)) if !key.contains(' ') => (key.trim(), value.trim()),
                _ => ("", body),
            };
            if key == "services" && value.is_empty() {
                block = Some(indent);
                continue;
            }
            if let Some(name) = CREDENTIALS.iter().find(|n| **n == key)
                && let Some(value) = literal(value)
            {
                values.entry(name).or_insert(value);
            }
            // `- MYSQL_ROOT_PASSWORD=x` (a list of `env:` entries, `docker run -e`).
            if let Some((name, value)) = body.split_once('=')
                && let Some(name) = CREDENTIALS.iter().find(|n| **n == name.trim())
                && let Some(value) = literal(value)
            {
                values.entry(name).or_insert(value);
            }
            let named = if matches!(key, "uses" | "image") {
                Some(value)
            } else if block.is_none() {
                None
            } else if key == "name" {
                // GitLab's `- name: postgres:15` in a services list.
                Some(value)
            } else if item.is_some() {
                // Travis and GitLab: `- redis-server`, `- postgres:15`.
                Some(body)
            } else if value.is_empty() {
                // A GitHub Actions service's label (`redis:`); its image says the rest.
                Some(key)
            } else {
                None
            };
            if let Some(kind) = named.and_then(kind_of) {
                kinds.insert(kind);
            }
        }
    }
    let get = |names: &[&str]| names.iter().find_map(|n| values.get(n).cloned());
    kinds
        .into_iter()
        .map(|kind| match kind {
            ServiceKind::Postgres => Service {
                kind,
                user: get(&["POSTGRES_USER"]),
                password: get(&["POSTGRES_PASSWORD"]),
                database: get(&["POSTGRES_DB"]),
            },
            ServiceKind::Mysql => {
                let empty_allowed = get(&[
                    "MYSQL_ALLOW_EMPTY_PASSWORD",
                    "MARIADB_ALLOW_EMPTY_ROOT_PASSWORD",
                ])
                .is_some_and(|v| !matches!(v.as_str(), "" | "no" | "false" | "0"));
                let user = get(&["MYSQL_USER", "MARIADB_USER"]);
                let password = if user.is_some() {
                    get(&["MYSQL_PASSWORD", "MARIADB_PASSWORD"])
                } else {
                    get(&["MYSQL_ROOT_PASSWORD", "MARIADB_ROOT_PASSWORD"])
                        .or_else(|| empty_allowed.then(String::new))
                };
                Service {
                    kind,
                    user,
                    password,
                    database: get(&["MYSQL_DATABASE", "MARIADB_DATABASE"]),
                }
            }
            _ => Service {
                kind,
                user: None,
                password: None,
                database: None,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::tree;

    #[test]
    fn services_of_every_ci_system_are_found_with_their_credentials() {
        let tmp = tree(&[
            (
                ".github/workflows/test.yml",
                "jobs:\n  test:\n    runs-on: ubuntu-latest\n    services:\n      db:\n        image: postgres:15-alpine\n        env:\n          POSTGRES_USER: app\n          POSTGRES_PASSWORD: secret # the tests' own\n          POSTGRES_DB: app_test\n        ports:\n          - 5432:5432\n    steps:\n      - uses: actions/checkout@v4\n      - name: Start Redis\n        uses: supercharge/redis-github-action@1.8.1\n        with:\n          redis-version: ${{ matrix.redis }}\n      - run: pytest\n  lint:\n    services:\n      - not-a-service-list\n    steps:\n      - run: ruff check\n",
            ),
            (
                ".travis.yml",
                "language: python\nservices:\n  - memcached\n  - docker\nscript: pytest\n",
            ),
        ]);
        assert_eq!(
            services(tmp.path()),
            [
                Service {
                    kind: ServiceKind::Redis,
                    user: None,
                    password: None,
                    database: None
                },
                Service {
                    kind: ServiceKind::Memcached,
                    user: None,
                    password: None,
                    database: None
                },
                Service {
                    kind: ServiceKind::Postgres,
                    user: Some("app".into()),
                    password: Some("secret".into()),
                    database: Some("app_test".into())
                },
            ]
        );
    }

    #[test]
    fn gitlab_and_circleci_images_and_mysql_credentials() {
        let tmp = tree(&[
            (
                ".gitlab-ci.yml",
                "test:\n  image: python:3.11\n  services:\n  - name: mariadb:10.11\n    alias: db\n  - postgres:15\n  variables:\n    MYSQL_ROOT_PASSWORD: \"rootpw\"\n    MYSQL_DATABASE: shop\n",
            ),
            (
                ".circleci/config.yml",
                "jobs:\n  build:\n    docker:\n      - image: cimg/python:3.11\n      - image: cimg/redis:7.0\n        environment:\n          - MYSQL_PASSWORD=${SECRET}\n",
            ),
        ]);
        let found = services(tmp.path());
        assert_eq!(
            found.iter().map(|s| s.kind).collect::<Vec<_>>(),
            [
                ServiceKind::Redis,
                ServiceKind::Postgres,
                ServiceKind::Mysql
            ]
        );
        assert_eq!(
            found[2],
            Service {
                kind: ServiceKind::Mysql,
                user: None,
                password: Some("rootpw".into()),
                database: Some("shop".into())
            }
        );
    }

    #[test]
    fn a_repository_without_services_has_none() {
        let tmp = tree(&[(
            ".github/workflows/ci.yml",
            "jobs:\n  t:\n    container:\n      image: python:3.11\n    steps:\n      - uses: actions/setup-python@v5\n      - run: pip install redis && pytest -k redis\n",
        )]);
        assert_eq!(services(tmp.path()), []);
    }
}
