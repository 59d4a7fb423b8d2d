//! `kiln repairs`: the repair rules launch tries.

use crate::common::print_json;
use crate::exit;
use crate::failure::Failure;

/// Lists the rule table.
pub fn run(json: bool) -> Result<u8, Failure> {
    let table = kiln_launch::rule_table();
    let scope = |ecosystems: &[kiln_launch::Ecosystem]| {
        if kiln_launch::applies_everywhere(ecosystems) {
            "any".to_string()
        } else {
            ecosystems
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if json {
        let rules: Vec<serde_json::Value> = table
            .iter()
            .map(|(r, ecosystems)| {
                serde_json::json!({
                    "name": r.name, "scope": scope(ecosystems), "phase": r.phase.as_str(),
                    "step": r.target.describe(), "signature": r.signature,
                    "description": r.description,
                })
            })
            .collect();
        print_json(&serde_json::json!({ "rules": rules }))?;
        return Ok(exit::OK);
    }
    println!(
        "Repair rules, tried in this order within each ecosystem, each at most once per launch (a row's `repairs` says which ran):\n"
    );
    for (rule, ecosystems) in &table {
        println!(
            "{} ({} {}):",
            rule.name,
            scope(ecosystems),
            rule.phase.as_str()
        );
        println!("  {}", rule.description);
        if let Some(step) = rule.target.describe() {
            println!("  when the failing step is {step}");
        }
        println!("  signature: {}\n", rule.signature);
    }
    Ok(exit::OK)
}
