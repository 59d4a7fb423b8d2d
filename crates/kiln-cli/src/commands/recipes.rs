//! `kiln recipes`: what the launch agent learned, per repository, in the dataset's store.

use super::Context;
use crate::common::{load, print_json};
use crate::exit;
use crate::failure::Failure;

/// Lists the dataset's recipes; unreadable files are listed with why (and exit 0: a broken
/// recipe is skipped by launch, not fatal).
pub fn run(cx: &Context) -> Result<u8, Failure> {
    let pipeline = load(&cx.config)?;
    let dir = kiln_pipeline::recipes_dir(&pipeline);
    let files = kiln_launch::recipe::list(&dir);
    if cx.json {
        let files: Vec<serde_json::Value> = files
            .iter()
            .map(|file| match file {
                Ok(file) => serde_json::to_value(file).unwrap_or_default(),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            })
            .collect();
        print_json(&serde_json::json!({"dir": dir, "files": files}))?;
        return Ok(exit::OK);
    }
    if files.is_empty() {
        println!(
            "No recipes in {} yet: the launch agent stores one when it builds a repository the rules could not.",
            dir.display()
        );
        return Ok(exit::OK);
    }
    println!(
        "Recipes in {} (replayed where the rules stop, before any LM call; edit or delete freely):\n",
        dir.display()
    );
    for file in &files {
        let file = match file {
            Ok(file) => file,
            Err(e) => {
                println!("unreadable, skipped by launch: {e}\n");
                continue;
            }
        };
        for recipe in &file.recipes {
            println!("{} ({})", file.repo, recipe.plan);
            println!(
                "  learned from {} on {} by {}",
                recipe.learned_from, recipe.created_at, recipe.model
            );
            if recipe.depends_on_files.is_empty() {
                println!("  relies on: no key (replayed for any commit of the plan)");
            } else {
                println!(
                    "  relies on: {} as they were ({})",
                    recipe.depends_on_files.join(", "),
                    recipe.depends_on.get(..12).unwrap_or(&recipe.depends_on)
                );
            }
            if !recipe.environment.is_empty() {
                let env: Vec<String> = recipe
                    .environment
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                println!("  environment: {}", env.join(" "));
            }
            for step in &recipe.steps {
                println!("  $ {}", kiln_core::shown(step));
            }
            println!(
                "  tests: {} (parser {}{})\n",
                kiln_core::shown(&recipe.test_command),
                recipe.parser,
                if recipe.parser_script.is_some() {
                    ", with a script"
                } else {
                    ""
                }
            );
        }
    }
    Ok(exit::OK)
}
