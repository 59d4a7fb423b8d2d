//! Recipes: what a launch agent learned about a repository, kept so that the next instance of
//! that repository is built without asking the LM.
//!
//! A recipe is what the agent did where the rules stopped: the environment variables it set,
//! the commands that changed the container and stayed (rolled-back ones are gone), the files it
//! wrote (as commands), and the test command, rebuild commands and parser it finished with.
//! When a later launch of the repository with the same plan fails where the rules stop (a
//! setup step no repair fixes, or a baseline run that does not count), the recipe is replayed
//! at that point before any LM call; only when it does not build is the agent asked.
//!
//! A recipe relies on the repository's dependency manifests as the commit that taught it had
//! them ([`dependency_key`]): it replays only for commits whose manifests are the same, so that
//! a repository that moved its build on is asked about again rather than given old steps.
//!
//! Recipes live in the dataset's store, one reviewable JSON file per repository
//! (`<root>/<dataset>/recipes/<owner>__<name>.json`), one entry per plan and key, so that a
//! later month's refresh starts from them and a user may read, edit or commit them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Format version of recipe files.
pub const RECIPE_FORMAT: u32 = 1;

/// One repository's recipes, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecipeFile {
    /// [`RECIPE_FORMAT`].
    pub format: u32,
    /// `owner/name`.
    pub repo: String,
    /// One per plan name.
    pub recipes: Vec<Recipe>,
}

/// What the agent learned for one repository and plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    /// The plan the rules chose (`python-pip`, ...): the files that shaped it.
    pub plan: String,
    /// The instance whose launch taught it.
    pub learned_from: String,
    /// When (RFC 3339).
    pub created_at: String,
    /// The model that was asked.
    pub model: String,
    /// Environment variables to set.
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Commands to run, in order, where the rules stopped.
    #[serde(default)]
    pub steps: Vec<String>,
    /// The test command.
    pub test_command: String,
    /// Commands to re-run after the source changes.
    #[serde(default)]
    pub rebuild_commands: Vec<String>,
    /// The test-log parser (`status-lines` with a script).
    pub parser: String,
    /// The parser script, when the agent wrote one.
    #[serde(default)]
    pub parser_script: Option<String>,
    /// What the recipe relies on: [`dependency_key`] of the checkout that taught it. A later
    /// launch replays it only where its checkout gives the same key; empty in recipes written
    /// before kiln kept it, which replay for any commit of their plan.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub depends_on: String,
    /// The files behind `depends_on`, for a reviewer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on_files: Vec<String>,
}

/// At most this many path components deep are the manifests a recipe relies on: the root's,
/// and those of workspace members (`crates/core/Cargo.toml`, `packages/app/package.json`).
const KEY_DEPTH: usize = 3;

/// Directories whose manifests are the tests' data or examples, not the project's build.
const KEY_SKIPPED_DIRS: &[&str] = &[
    "test",
    "tests",
    "testdata",
    "fixtures",
    "__fixtures__",
    "examples",
    "example",
    "docs",
    "doc",
    "benches",
    "vendor",
    "third_party",
];

/// Lockfiles: they change on most commits (a bot's update, a new dependency's own lock) while
/// what a recipe did (a system package, a variable, a test command) still holds.
const LOCKFILES: &[&str] = &[
    "Cargo.lock",
    "go.sum",
    "go.work.sum",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "Pipfile.lock",
    "poetry.lock",
    "pdm.lock",
    "uv.lock",
];

/// At most this many recipes are kept per plan (the newest): each new state of the manifests
/// the agent was asked about adds one.
pub const RECIPES_PER_PLAN: usize = 8;

/// What a recipe learned at `tree` relies on: a SHA-256 over the path and blob id of each
/// dependency manifest ([`crate::steps::is_dependency_manifest`], lockfiles left out) of the
/// root and of workspace members (within [`KEY_DEPTH`] components, not under tests, examples or
/// vendored code), and those paths. A commit that changes one of them (a new requirement, a
/// moved build system) gets another key, and the recipe is not replayed there.
#[must_use]
pub fn dependency_key(tree: &kiln_core::checkout::Tree) -> (String, Vec<String>) {
    use sha2::{Digest, Sha256};
    let files: Vec<String> = tree
        .paths()
        .filter(|p| {
            let parts: Vec<&str> = p.split('/').collect();
            let (name, dirs) = parts.split_last().unwrap_or((&"", &[]));
            parts.len() <= KEY_DEPTH
                && !dirs
                    .iter()
                    .any(|d| KEY_SKIPPED_DIRS.contains(d) || d.starts_with('.'))
                && !LOCKFILES.contains(name)
                && crate::steps::is_dependency_manifest(p)
        })
        .map(str::to_string)
        .collect();
    let mut hash = Sha256::new();
    for path in &files {
        let oid = tree.get(path).map_or("", |t| t.oid.as_str());
        hash.update(format!("{path}\0{oid}\n").as_bytes());
    }
    let key = hash
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    (key, files)
}

/// Why a recipe file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{operation} the recipe file {path}: {message}")]
pub struct RecipeError {
    /// What kiln was doing with the file: `read` or `write`.
    pub operation: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub message: String,
}

/// The file of `repo`'s recipes in `dir`.
#[must_use]
pub fn recipe_path(dir: &Path, repo: &str) -> PathBuf {
    dir.join(format!(
        "{}.json",
        kiln_schema::safe_name(&repo.replace('/', "__"))
    ))
}

/// Reads `repo`'s recipe file from `dir`; `Ok(None)` when there is none.
///
/// # Errors
/// A file that cannot be read or is not a recipe file of this format.
pub fn read(dir: &Path, repo: &str) -> Result<Option<RecipeFile>, RecipeError> {
    let path = recipe_path(dir, repo);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(RecipeError {
                operation: "read",
                path,
                message: e.to_string(),
            });
        }
    };
    parse(&text).map(Some).map_err(|message| RecipeError {
        operation: "read",
        path,
        message,
    })
}

/// Reads a recipe file's text.
///
/// # Errors
/// Text that is not a recipe file of [`RECIPE_FORMAT`], as a message with line and column.
pub fn parse(text: &str) -> Result<RecipeFile, String> {
    let file: RecipeFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if file.format != RECIPE_FORMAT {
        return Err(format!(
            "recipe format {} (this kiln reads format {RECIPE_FORMAT})",
            file.format
        ));
    }
    Ok(file)
}

/// The recipe of `repo` for `plan` in `dir` that relies on what the checkout of key `key`
/// holds ([`dependency_key`]), if any; a recipe without a key (written before kiln kept one)
/// serves when none has the key. A file that cannot be read is reported and counts as none: a
/// broken recipe must not stop a launch.
#[must_use]
pub fn find(dir: &Path, repo: &str, plan: &str, key: &str) -> Option<Recipe> {
    match read(dir, repo) {
        Ok(file) => {
            let mut of_plan: Vec<Recipe> = file?
                .recipes
                .into_iter()
                .filter(|r| r.plan == plan)
                .collect();
            let at = of_plan
                .iter()
                .position(|r| r.depends_on == key)
                .or_else(|| of_plan.iter().position(|r| r.depends_on.is_empty()))?;
            Some(of_plan.swap_remove(at))
        }
        Err(e) => {
            tracing::warn!("recipe not used: {e}");
            None
        }
    }
}

/// Stores `recipe` for `repo` in `dir`, replacing the repository's recipe for the same plan
/// and key (and a keyless one of the plan: what it did is now known by its key);
/// written to a temporary file and renamed, so a crash leaves the old file or the new one.
///
/// # Errors
/// When the directory or the file cannot be written.
pub fn store(dir: &Path, repo: &str, recipe: Recipe) -> Result<PathBuf, RecipeError> {
    let path = recipe_path(dir, repo);
    let error = |e: &dyn std::fmt::Display| RecipeError {
        operation: "write",
        path: path.clone(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| error(&e))?;
    // A file that cannot be read is replaced: its recipes would never be used anyway.
    let mut file = read(dir, repo).ok().flatten().unwrap_or(RecipeFile {
        format: RECIPE_FORMAT,
        repo: repo.to_string(),
        recipes: Vec::new(),
    });
    file.recipes.retain(|r| {
        r.plan != recipe.plan || !(r.depends_on == recipe.depends_on || r.depends_on.is_empty())
    });
    let plan = recipe.plan.clone();
    file.recipes.push(recipe);
    // The newest of the plan's recipes are kept (RFC 3339 times sort as text).
    let mut of_plan: Vec<(String, String)> = file
        .recipes
        .iter()
        .filter(|r| r.plan == plan)
        .map(|r| (r.created_at.clone(), r.depends_on.clone()))
        .collect();
    of_plan.sort();
    let dropped = of_plan.len().saturating_sub(RECIPES_PER_PLAN);
    for (created_at, key) in &of_plan[..dropped] {
        file.recipes
            .retain(|r| !(r.plan == plan && &r.created_at == created_at && &r.depends_on == key));
    }
    file.recipes
        .sort_by(|a, b| (&a.plan, &a.depends_on).cmp(&(&b.plan, &b.depends_on)));
    let mut text = serde_json::to_string_pretty(&file).map_err(|e| error(&e))?;
    text.push('\n');
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| error(&e))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(|e| error(&e))?;
    tmp.persist(&path).map_err(|e| error(&e.error))?;
    Ok(path)
}

/// Where the recipe learned from `instance` waits for its validation.
fn pending_path(dir: &Path, instance: &str) -> PathBuf {
    dir.join("pending")
        .join(format!("{}.json", kiln_schema::safe_name(instance)))
}

/// A recipe waiting for the validation of the instance that taught it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// `owner/name`.
    pub repo: String,
    /// The recipe.
    pub recipe: Recipe,
}

/// Keeps `recipe`, learned from `instance` of `repo`, apart until that instance validates
/// ([`promote`]): a recipe whose own instance does not validate (its tests fail in every run, or
/// its environment forges passes) must never be replayed for the next one.
///
/// # Errors
/// When the directory or the file cannot be written.
pub fn store_pending(
    dir: &Path,
    instance: &str,
    repo: &str,
    recipe: Recipe,
) -> Result<PathBuf, RecipeError> {
    let path = pending_path(dir, instance);
    let error = |e: &dyn std::fmt::Display| RecipeError {
        operation: "write",
        path: path.clone(),
        message: e.to_string(),
    };
    let parent = path.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent).map_err(|e| error(&e))?;
    let pending = Pending {
        repo: repo.to_string(),
        recipe,
    };
    let mut text = serde_json::to_string_pretty(&pending).map_err(|e| error(&e))?;
    text.push('\n');
    let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(|e| error(&e))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(|e| error(&e))?;
    tmp.persist(&path).map_err(|e| error(&e.error))?;
    Ok(path)
}

/// Stores the recipe `instance` taught, now that the instance validated, as its repository's
/// recipe for the plan ([`store`]); `Ok(None)` when none waits.
///
/// # Errors
/// When a file cannot be read or written.
pub fn promote(dir: &Path, instance: &str) -> Result<Option<PathBuf>, RecipeError> {
    let path = pending_path(dir, instance);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(RecipeError {
                operation: "read",
                path,
                message: e.to_string(),
            });
        }
    };
    let pending: Pending = serde_json::from_str(&text).map_err(|e| RecipeError {
        operation: "read",
        path: path.clone(),
        message: e.to_string(),
    })?;
    let stored = store(dir, &pending.repo, pending.recipe)?;
    discard(dir, instance)?;
    Ok(Some(stored))
}

/// Drops the recipe `instance` taught: the instance did not validate.
///
/// # Errors
/// When the file exists and cannot be removed.
pub fn discard(dir: &Path, instance: &str) -> Result<(), RecipeError> {
    let path = pending_path(dir, instance);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(RecipeError {
            operation: "remove",
            path,
            message: e.to_string(),
        }),
    }
}

/// Every recipe file in `dir`, by file name; unreadable ones as errors.
#[must_use]
pub fn list(dir: &Path) -> Vec<Result<RecipeFile, RecipeError>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|e| RecipeError {
                operation: "read",
                path: path.clone(),
                message: e.to_string(),
            })?;
            parse(&text).map_err(|message| RecipeError {
                operation: "read",
                path,
                message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(plan: &str, step: &str) -> Recipe {
        Recipe {
            plan: plan.into(),
            learned_from: "o__r-1".into(),
            created_at: "2026-12-05T00:00:00Z".into(),
            model: "m".into(),
            environment: BTreeMap::from([("UNITS".into(), "metric".into())]),
            steps: vec![step.into()],
            test_command: "pytest -rA".into(),
            rebuild_commands: Vec::new(),
            parser: "pytest".into(),
            parser_script: None,
            depends_on: "k1".into(),
            depends_on_files: vec!["setup.py".into()],
        }
    }

    #[test]
    fn stored_recipes_are_found_by_repository_and_plan_and_replaced_per_plan() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find(dir.path(), "o/r", "python-pip", "k1"), None);
        store(
            dir.path(),
            "o/r",
            recipe("python-pip", "apt-get install -y jq"),
        )
        .unwrap();
        store(dir.path(), "o/r", recipe("python-setup", "true")).unwrap();
        let path = store(
            dir.path(),
            "o/r",
            recipe("python-pip", "apt-get install -y yq"),
        )
        .unwrap();
        assert_eq!(path, dir.path().join("o__r.json"));
        let found = find(dir.path(), "o/r", "python-pip", "k1").unwrap();
        assert_eq!(found.steps, ["apt-get install -y yq"]);
        assert_eq!(find(dir.path(), "o/other", "python-pip", "k1"), None);
        let listed = list(dir.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].as_ref().unwrap().recipes.len(), 2);
    }

    #[test]
    fn a_recipe_replays_only_where_the_manifests_it_relied_on_are_the_same() {
        let tree = |setup: &str| {
            kiln_core::checkout::Tree::new(
                [
                    ("setup.py".to_string(), 0o100_644, setup.to_string()),
                    (
                        "src/pkg/__init__.py".to_string(),
                        0o100_644,
                        "a1".to_string(),
                    ),
                    (
                        "tests/fixtures/app/package.json".to_string(),
                        0o100_644,
                        "b1".to_string(),
                    ),
                    (
                        "crates/core/Cargo.toml".to_string(),
                        0o100_644,
                        "m1".to_string(),
                    ),
                    ("Cargo.lock".to_string(), 0o100_644, setup.to_string()),
                ],
                BTreeMap::new(),
            )
        };
        let (key, files) = dependency_key(&tree("c1"));
        // A workspace member's manifest counts; a test fixture's and the lockfile do not.
        assert_eq!(files, ["crates/core/Cargo.toml", "setup.py"]);
        assert_eq!(key.len(), 64);
        // Code and the lockfile changed, manifests did not: the same key.
        let same = kiln_core::checkout::Tree::new(
            [
                ("setup.py".to_string(), 0o100_644, "c1".to_string()),
                (
                    "crates/core/Cargo.toml".to_string(),
                    0o100_644,
                    "m1".to_string(),
                ),
                ("Cargo.lock".to_string(), 0o100_644, "l9".to_string()),
                (
                    "src/pkg/__init__.py".to_string(),
                    0o100_644,
                    "a2".to_string(),
                ),
            ],
            BTreeMap::new(),
        );
        assert_eq!(dependency_key(&same).0, key);
        let (moved, _) = dependency_key(&tree("c2"));
        assert_ne!(moved, key);

        let dir = tempfile::tempdir().unwrap();
        let keyed = |key: &str, step: &str| Recipe {
            depends_on: key.into(),
            ..recipe("python-pip", step)
        };
        store(dir.path(), "o/r", keyed(&key, "apt-get install -y jq")).unwrap();
        assert!(find(dir.path(), "o/r", "python-pip", &key).is_some());
        assert_eq!(find(dir.path(), "o/r", "python-pip", &moved), None);
        // A recipe from before keys serves any key until one of the plan has it; learning one
        // with a key replaces it.
        store(dir.path(), "o/r", keyed("", "make")).unwrap();
        assert_eq!(
            find(dir.path(), "o/r", "python-pip", &moved).unwrap().steps,
            ["make"]
        );
        assert_eq!(
            find(dir.path(), "o/r", "python-pip", &key).unwrap().steps,
            ["apt-get install -y jq"]
        );
        store(dir.path(), "o/r", keyed(&moved, "make install")).unwrap();
        let file = read(dir.path(), "o/r").unwrap().unwrap();
        let keys: Vec<&str> = file.recipes.iter().map(|r| r.depends_on.as_str()).collect();
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert!(!keys.contains(&""));
    }

    #[test]
    fn a_plan_keeps_its_newest_recipes() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..RECIPES_PER_PLAN + 2 {
            let recipe = Recipe {
                depends_on: format!("key{n:02}"),
                created_at: format!("2026-12-05T00:00:{n:02}Z"),
                ..recipe("python-pip", "make")
            };
            store(dir.path(), "o/r", recipe).unwrap();
        }
        store(dir.path(), "o/r", recipe("python-setup", "true")).unwrap();
        let file = read(dir.path(), "o/r").unwrap().unwrap();
        let keys: Vec<&str> = file
            .recipes
            .iter()
            .filter(|r| r.plan == "python-pip")
            .map(|r| r.depends_on.as_str())
            .collect();
        assert_eq!(keys.len(), RECIPES_PER_PLAN);
        assert!(
            !keys.contains(&"key00") && !keys.contains(&"key01"),
            "{keys:?}"
        );
        assert!(file.recipes.iter().any(|r| r.plan == "python-setup"));
    }

    #[test]
    fn a_recipe_is_replayed_only_once_its_instance_validated() {
        let dir = tempfile::tempdir().unwrap();
        store_pending(dir.path(), "o__r-1", "o/r", recipe("python-pip", "make")).unwrap();
        store_pending(dir.path(), "o__r-2", "o/r", recipe("python-setup", "make")).unwrap();
        assert_eq!(find(dir.path(), "o/r", "python-pip", "k1"), None);
        assert!(list(dir.path()).is_empty());
        assert!(promote(dir.path(), "o__r-1").unwrap().is_some());
        discard(dir.path(), "o__r-2").unwrap();
        assert!(find(dir.path(), "o/r", "python-pip", "k1").is_some());
        assert_eq!(find(dir.path(), "o/r", "python-setup", "k1"), None);
        assert_eq!(promote(dir.path(), "o__r-2").unwrap(), None);
        assert_eq!(promote(dir.path(), "o__r-1").unwrap(), None);
    }

    #[test]
    fn a_broken_file_is_an_error_naming_it_and_counts_as_no_recipe() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("o__r.json"), "{\"format\": 1, \"repo\": ").unwrap();
        let error = read(dir.path(), "o/r").unwrap_err().to_string();
        assert!(
            error.contains("o__r.json") && error.contains("line 1"),
            "{error}"
        );
        assert_eq!(find(dir.path(), "o/r", "p", "k1"), None);
        std::fs::write(
            dir.path().join("o__r.json"),
            "{\"format\": 9, \"repo\": \"o/r\", \"recipes\": []}",
        )
        .unwrap();
        assert!(
            read(dir.path(), "o/r")
                .unwrap_err()
                .to_string()
                .contains("format 9")
        );
    }
}
