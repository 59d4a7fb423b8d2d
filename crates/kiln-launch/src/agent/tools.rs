//! The agent's tools: their JSON Schemas as the model sees them, and the calls read back into
//! typed actions. A call that does not fit its schema is answered with what is wrong, as a
//! tool result, so the model can correct itself.

use std::time::Duration;

use kiln_core::lm::{ToolCall, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

/// One thing the agent asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Run a shell command in the container.
    Run {
        /// The command (bash, from the repository root).
        command: String,
        /// Its timeout, when the model gave one (bounded by the configured one).
        timeout: Option<Duration>,
    },
    /// Read part of a file.
    ReadFile {
        /// The path (relative to the repository root, or absolute).
        path: String,
        /// First line to show (1-based).
        from_line: usize,
    },
    /// List a directory.
    ListDir {
        /// The path.
        path: String,
    },
    /// Write a whole file.
    WriteFile {
        /// The path.
        path: String,
        /// Its new content.
        content: String,
    },
    /// Set an environment variable for every later command, the tests and the image.
    SetEnv {
        /// The name.
        name: String,
        /// The value.
        value: String,
    },
    /// Declare the environment built.
    Finish(Finish),
    /// Stop: the repository cannot be built here (the rules' failure stands).
    GiveUp {
        /// Why, for the row.
        reason: String,
    },
}

/// What `finish` declares.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Finish {
    /// The command that runs the tests, from the repository root.
    pub(crate) test_command: String,
    /// A library parser's name, or `script` with `parser_script`.
    pub(crate) parser: String,
    /// The `sh` script that reads the test output on stdin and prints status lines.
    #[serde(default)]
    pub(crate) parser_script: Option<String>,
    /// Commands to re-run after the source changes, before the tests; `None` keeps the rules'.
    #[serde(default)]
    pub(crate) rebuild_commands: Option<Vec<String>>,
    /// What was wrong and what fixed it, in a sentence or two.
    #[serde(default)]
    pub(crate) summary: String,
}

/// The tools offered, with the library parsers' names in `finish`'s description.
#[must_use]
pub(crate) fn specs() -> Vec<ToolSpec> {
    let parsers = kiln_testlog::parser_names()
        .iter()
        .filter(|p| **p != "status-lines")
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        ToolSpec {
            name: "run".into(),
            description: "Run a bash command in the container, from the repository root \
                (/testbed), as root. Returns the exit code and the output (long output keeps \
                its head and tail). A command that may change the container and fails is \
                rolled back: the container is as it was before it. Environment variables \
                set with `export` do not survive the command; use set_env."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command."},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "description": "Kill it after this long (default and maximum: the configured command timeout)."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file, 200 lines from from_line.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "from_line": {"type": "integer", "minimum": 1}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory (names, sizes, types).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "write_file".into(),
            description: "Write a whole text file (created with its directories, or replaced). \
                Files the test patch touches may not be written."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "set_env".into(),
            description: "Set an environment variable for every later command, the test runs \
                and the environment image."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                    "value": {"type": "string"}
                },
                "required": ["name", "value"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "give_up".into(),
            description: "Stop when the environment cannot be built here (a dependency that \
                does not exist, a platform the tests need that this is not): the rules' \
                failure stands, with your reason."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"reason": {"type": "string"}},
                "required": ["reason"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: "finish".into(),
            description: format!(
                "Declare the environment built. kiln commits the container, runs test_command \
                 and reads its output with the parser; the build counts when the statuses \
                 parse and enough tests pass, else you are told why and may go on. parser is \
                 one of: {parsers}; or `script`, with parser_script: an sh script that reads \
                 the test output on stdin and prints one line per test, `[PASSED] id`, \
                 `[FAILED] id`, `[SKIPPED] id` or `[ERROR] id`, and optionally \
                 `[TOTALS] passed=N failed=N skipped=N errors=N` with the totals the framework \
                 printed. A script's statuses must agree with the exit code (0 exactly when no \
                 test failed) and with its totals. rebuild_commands (run after a patch, before \
                 the tests) default to the rules' ones."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "test_command": {"type": "string"},
                    "parser": {"type": "string"},
                    "parser_script": {"type": "string"},
                    "rebuild_commands": {"type": "array", "items": {"type": "string"}},
                    "summary": {"type": "string"}
                },
                "required": ["test_command", "parser"],
                "additionalProperties": false
            }),
        },
    ]
}

/// Reads a tool call; `Err` says what is wrong with it, for the model.
pub(crate) fn read(call: &ToolCall) -> Result<Action, String> {
    let arguments: Value = serde_json::from_str(&call.function.arguments)
        .map_err(|e| format!("the arguments are not a JSON object: {e}"))?;
    let text = |key: &str| -> Result<String, String> {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("`{key}` (a string) is required"))
    };
    Ok(match call.function.name.as_str() {
        "run" => Action::Run {
            command: text("command")?,
            timeout: arguments
                .get("timeout_seconds")
                .and_then(Value::as_u64)
                .map(Duration::from_secs),
        },
        "read_file" => Action::ReadFile {
            path: text("path")?,
            from_line: arguments
                .get("from_line")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(1)
                .max(1),
        },
        "list_dir" => Action::ListDir {
            path: text("path")?,
        },
        "write_file" => Action::WriteFile {
            path: text("path")?,
            content: text("content")?,
        },
        "set_env" => {
            let name = text("name")?;
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!("`{name}` is not an environment variable name"));
            }
            Action::SetEnv {
                name,
                value: text("value")?,
            }
        }
        "give_up" => Action::GiveUp {
            reason: text("reason")?,
        },
        "finish" => {
            Action::Finish(serde_json::from_value(arguments).map_err(|e| format!("finish: {e}"))?)
        }
        other => {
            return Err(format!(
                "there is no tool `{other}`; the tools are run, read_file, list_dir, \
                 write_file, set_env, finish and give_up"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &Value) -> ToolCall {
        ToolCall::new("call_1", name, arguments)
    }

    #[test]
    fn calls_become_actions() {
        assert_eq!(
            read(&call(
                "run",
                &json!({"command": "ls", "timeout_seconds": 5})
            )),
            Ok(Action::Run {
                command: "ls".into(),
                timeout: Some(Duration::from_secs(5))
            })
        );
        assert_eq!(
            read(&call(
                "set_env",
                &json!({"name": "UNITS", "value": "metric"})
            )),
            Ok(Action::SetEnv {
                name: "UNITS".into(),
                value: "metric".into()
            })
        );
        let Ok(Action::Finish(finish)) = read(&call(
            "finish",
            &json!({"test_command": "pytest -rA", "parser": "pytest"}),
        )) else {
            panic!("finish");
        };
        assert_eq!(finish.parser, "pytest");
        assert_eq!(finish.rebuild_commands, None);
    }

    #[test]
    fn bad_calls_say_what_is_wrong() {
        let wrong = |name: &str, arguments: Value| read(&call(name, &arguments)).unwrap_err();
        assert!(wrong("run", json!({})).contains("`command`"));
        assert!(
            wrong("set_env", json!({"name": "A B", "value": ""})).contains("not an environment")
        );
        assert!(wrong("deploy", json!({})).contains("no tool `deploy`"));
        assert!(wrong("finish", json!({"parser": "pytest"})).contains("test_command"));
        let garbled = ToolCall::new("c", "run", &json!(null));
        let mut garbled = garbled;
        garbled.function.arguments = "{\"command\": ".into();
        assert!(read(&garbled).unwrap_err().contains("not a JSON object"));
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        for spec in specs() {
            assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        }
        assert!(specs().iter().any(|s| s.description.contains("junit-xml")));
        assert_eq!(specs().len(), 7);
    }
}
