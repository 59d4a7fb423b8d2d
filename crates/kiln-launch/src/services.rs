//! The services a repository's tests talk to, run inside the test container from Debian's
//! packages: the CI starts a Redis or PostgreSQL server beside its jobs
//! ([`crate::ci::services`]); kiln installs the same server in the image, sets up the user and
//! database the CI's variables name, and starts it before every test run (each run is a fresh
//! container, validation's without a network: the servers listen on loopback, which it has).

use crate::ci::{Service, ServiceKind};
use crate::plan::Plan;
use crate::shell::{join, quote};
use crate::steps::Step;

/// Debian packages of a server.
fn packages(kind: ServiceKind) -> &'static [&'static str] {
    match kind {
        ServiceKind::Redis => &["redis-server"],
        ServiceKind::Memcached => &["memcached"],
        ServiceKind::Postgres => &["postgresql"],
        ServiceKind::Mysql => &["mariadb-server"],
    }
}

/// Starts the server in the background and waits until it answers (a few seconds at most).
fn start(kind: ServiceKind) -> &'static str {
    match kind {
        ServiceKind::Redis => {
            "redis-server --daemonize yes --save '' --appendonly no >/dev/null; for i in $(seq 50); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.1; done"
        }
        ServiceKind::Memcached => "memcached -d -u root -l 127.0.0.1",
        // The init scripts return once the server accepts connections.
        ServiceKind::Postgres => "service postgresql start >/dev/null",
        ServiceKind::Mysql => "{ service mariadb start || service mysql start; } >/dev/null",
    }
}

/// The setup step that gives a database server the user, password and database the CI's
/// variables name (the official images' defaults where it names none), run once in the image.
fn setup(service: &Service) -> Option<String> {
    match service.kind {
        ServiceKind::Postgres => {
            let user = service.user.as_deref().unwrap_or("postgres");
            let password = service.password.as_deref().unwrap_or("postgres");
            // Idempotent: a reused environment runs its setup again.
            let mut sql = Vec::new();
            if user != "postgres" {
                sql.push(format!(
                    "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') THEN CREATE ROLE \"{user}\" LOGIN SUPERUSER; END IF; END$$;"
                ));
            }
            sql.push(format!("ALTER ROLE \"{user}\" PASSWORD '{password}';"));
            // The image creates a database named after the user unless told another.
            let database = service.database.as_deref().unwrap_or(user);
            if database != "postgres" {
                sql.push(format!(
                    "SELECT 'CREATE DATABASE \"{database}\" OWNER \"{user}\"' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{database}')\\gexec"
                ));
            }
            Some(format!(
                "service postgresql start && printf '%s\\n' {} | su postgres -c 'psql -q -v ON_ERROR_STOP=1' && service postgresql stop",
                join(&sql)
            ))
        }
        ServiceKind::Mysql => {
            let password = service.password.as_deref().unwrap_or("");
            let mut sql = Vec::new();
            match service.user.as_deref() {
                Some(user) if user != "root" => {
                    sql.push(format!(
                        "CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}';"
                    ));
                    sql.push(format!("CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED BY '{password}';"));
                    sql.push(format!("GRANT ALL ON *.* TO '{user}'@'%';"));
                    sql.push(format!("GRANT ALL ON *.* TO '{user}'@'localhost';"));
                }
                _ => sql.push(format!(
                    "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('{password}');"
                )),
            }
            if let Some(database) = &service.database {
                sql.push(format!("CREATE DATABASE IF NOT EXISTS `{database}`;"));
            }
            Some(format!(
                "{{ service mariadb start || service mysql start; }} && mariadb -e {} && {{ service mariadb stop || service mysql stop; }}",
                quote(&sql.join(" "))
            ))
        }
        ServiceKind::Redis | ServiceKind::Memcached => None,
    }
}

/// How the row describes a service.
fn describe(service: &Service) -> String {
    let mut text = service.kind.as_str().to_string();
    let mut parts = Vec::new();
    if let Some(user) = &service.user {
        parts.push(format!("user {user}"));
    }
    if let Some(database) = &service.database {
        parts.push(format!("database {database}"));
    }
    if !parts.is_empty() {
        text.push_str(&format!(" ({})", parts.join(", ")));
    }
    text
}

/// Adds `services` to `plan`: their packages to its apt step (one made after the git setup
/// when it has none), their setup after it, their start before the tests, and a word in the
/// version reason.
pub fn apply(plan: &mut Plan, services: &[Service]) {
    if services.is_empty() {
        return;
    }
    let wanted: Vec<String> = services
        .iter()
        .flat_map(|s| packages(s.kind).iter().map(|p| (*p).to_string()))
        .collect();
    let at = match plan.setup.iter().position(|s| matches!(s, Step::Apt(_))) {
        Some(at) => at,
        None => {
            let at = usize::from(!plan.setup.is_empty()).min(plan.setup.len());
            plan.setup.insert(at, Step::Apt(Vec::new()));
            at
        }
    };
    if let Step::Apt(list) = &mut plan.setup[at] {
        for package in wanted {
            if !list.contains(&package) {
                list.push(package);
            }
        }
    }
    let steps: Vec<Step> = services.iter().filter_map(setup).map(Step::Shell).collect();
    for (offset, step) in steps.into_iter().enumerate() {
        plan.setup.insert(at + 1 + offset, step);
    }
    plan.test
        .prelude
        .extend(services.iter().map(|s| start(s.kind).to_string()));
    let list: Vec<String> = services.iter().map(describe).collect();
    plan.version_reason.push_str(&format!(
        "; services the CI starts, run in the test container: {}",
        list.join(", ")
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testutil::plan_of;

    #[test]
    fn services_join_the_apt_step_the_setup_and_the_test_command() {
        let mut plan = plan_of(
            crate::ecosystems::python::plan,
            &[
                (
                    "setup.py",
                    "from setuptools import setup\nsetup(name='x')\n",
                ),
                ("tests/test_x.py", "def test_x():\n    pass\n"),
            ],
            None,
        )
        .expect("no plan");
        let had_apt = plan.setup.iter().any(|s| matches!(s, Step::Apt(_)));
        let before = plan.setup.len();
        apply(
            &mut plan,
            &[
                Service {
                    kind: ServiceKind::Redis,
                    user: None,
                    password: None,
                    database: None,
                },
                Service {
                    kind: ServiceKind::Postgres,
                    user: Some("app".into()),
                    password: Some("secret".into()),
                    database: Some("app_test".into()),
                },
            ],
        );
        let apt = plan
            .setup
            .iter()
            .position(|s| matches!(s, Step::Apt(_)))
            .expect("an apt step");
        let Step::Apt(packages) = &plan.setup[apt] else {
            unreachable!()
        };
        assert!(packages.contains(&"redis-server".to_string()));
        assert!(packages.contains(&"postgresql".to_string()));
        // One step for PostgreSQL's user and database, and an apt step where there was none.
        assert_eq!(plan.setup.len(), before + 1 + usize::from(!had_apt));
        assert_eq!(
            plan.setup[apt + 1].render(),
            "service postgresql start && printf '%s\\n' 'DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\\''app'\\'') THEN CREATE ROLE \"app\" LOGIN SUPERUSER; END IF; END$$;' 'ALTER ROLE \"app\" PASSWORD '\\''secret'\\'';' 'SELECT '\\''CREATE DATABASE \"app_test\" OWNER \"app\"'\\'' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '\\''app_test'\\'')\\gexec' | su postgres -c 'psql -q -v ON_ERROR_STOP=1' && service postgresql stop"
        );
        let test = plan.test.render();
        assert!(
            test.starts_with("redis-server --daemonize yes --save '' --appendonly no >/dev/null; for i in $(seq 50); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.1; done; service postgresql start >/dev/null; "),
            "{test}"
        );
        assert!(
            plan.version_reason.ends_with(
                "; services the CI starts, run in the test container: redis, postgresql (user app, database app_test)"
            ),
            "{}",
            plan.version_reason
        );
    }

    #[test]
    fn mysql_gets_its_user_or_roots_password() {
        let root = setup(&Service {
            kind: ServiceKind::Mysql,
            user: None,
            password: Some(String::new()),
            database: Some("shop".into()),
        })
        .unwrap();
        assert_eq!(
            root,
            "{ service mariadb start || service mysql start; } && mariadb -e 'ALTER USER '\\''root'\\''@'\\''localhost'\\'' IDENTIFIED VIA mysql_native_password USING PASSWORD('\\'''\\''); CREATE DATABASE IF NOT EXISTS `shop`;' && { service mariadb stop || service mysql stop; }"
        );
    }
}
