//! Columns: their types, the sink rows write their values to, the [`Row`] trait and the
//! `table!` macro that declares a row type with its columns, and the JSON Schema of a table.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::id::InstanceId;
use crate::status::{
    BuiltBy, CandidateStatus, Difficulty, DropReason, EnvironmentStatus, FailureClass, Relation,
    ValidationStatus,
};

/// Version of the on-disk format of every table. Bump it when a column changes meaning or type.
/// 3: verdicts and platform labels carry the LM judges' votes, answers, tokens and cost.
/// 5: environments record the test scope launch chose (`test_scope`).
/// 6: validations name the SWE-bench harness parser that agrees with kiln (`log_parser`);
/// release rows carry what the SWE-bench harness and SWE-bench-Live read (`eval_script`, ...).
/// 8: environments keep the error lines of a failure (`error_lines`) and the committed image's
/// id (`image_digest`).
/// 9: release rows store `FAIL_TO_PASS`/`PASS_TO_PASS` as JSON text, as SWE-bench does, name
/// each column once (`image`, `rebuild_cmds`, `test_cmds`) and carry the image's digest
/// (`image_digest`).
/// 10: validations list the tests the harness parser cannot read (`harness_unread`), and
/// release rows keep them apart (`FAIL_TO_PASS_UNGRADED`, `PASS_TO_PASS_UNGRADED`).
/// 11: validations name the tests that failed for want of a network (`needs_network`).
/// 12: environments list the untracked files the environment left in the checkout
/// (`environment_files`).
/// 13: environments and validations carry the CPU seconds their containers used, by phase
/// (`cpu_setup_seconds`, `cpu_compile_seconds`, `cpu_baseline_seconds`; `cpu_build_seconds`,
/// `cpu_test_seconds`).
/// 14: validations and release rows carry quality signals: how many runs of each side repeated
/// the first one's statuses (`identical_runs_before`, `identical_runs_after`), and whether the
/// problem statement or hints show the fix's code (`solution_leak`, `solution_leak_matches`),
/// and a difficulty band from the gold patch (`difficulty`, `difficulty_measures`); release rows
/// carry the filter's verdict (`filter_judge`, `filter_label`, `filter_reason`, `filter_flags`,
/// `filter_fallback`).
/// 15: validations and release rows carry how many of the tests the test patch's files define
/// the runs reported (`tests_defined`, `tests_collected`; validations also `tests_not_collected`).
/// 16: environments name the tests that failed for want of a network in the baseline and that
/// the test command leaves out (`tests_left_out`), and the whole suite's command where the
/// test command is narrowed (`whole_test_command`), and the runner's listing of tests
/// (`collect_command`); validations and release rows carry the
/// sampled whole-suite check (`whole_suite`, `broken_outside_scope`).
pub const SCHEMA_VERSION: u32 = 16;

/// Logical type of one column, as stored in Parquet and described in JSON Schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// UTF-8 string, never null.
    Str,
    /// UTF-8 string or null.
    OptStr,
    /// 64-bit signed integer, never null.
    Int,
    /// 64-bit signed integer or null.
    OptInt,
    /// 64-bit float, never null.
    Float,
    /// 64-bit float or null.
    OptFloat,
    /// Boolean, never null.
    Bool,
    /// List of UTF-8 strings (Arrow `list<string>`), never null.
    StrList,
    /// A list of strings as JSON text in a string column (`["a", "b"]`), as SWE-bench stores
    /// its test lists; never null.
    JsonList,
    /// A nested value stored as a JSON document in a string column, so every Parquet reader can
    /// read it without nested types.
    Json,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    /// Column name, equal to the serde field name of the row type.
    pub name: &'static str,
    /// Logical type.
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// What the column holds: the field's doc comment as written, one line per doc line.
    pub doc: &'static str,
}

impl Column {
    /// The doc comment as one paragraph (lines trimmed and joined by spaces).
    #[must_use]
    pub fn description(&self) -> String {
        self.doc
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl ColumnType {
    /// The type as Arrow (and Hugging Face `datasets`) reads it: `string`, `list<string>`, ...
    #[must_use]
    pub fn arrow_name(self) -> &'static str {
        match self {
            Self::Str => "string",
            Self::OptStr => "string (nullable)",
            Self::Int => "int64",
            Self::OptInt => "int64 (nullable)",
            Self::Float => "float64",
            Self::OptFloat => "float64 (nullable)",
            Self::Bool => "bool",
            Self::StrList => "list<string>",
            Self::JsonList => "string (JSON list)",
            Self::Json => "string (JSON)",
        }
    }
}

/// Where a row's values go, one call per column in column order: the column builders of a
/// storage format. Rows write themselves ([`Row::write_columns`]) without an intermediate
/// document, so storing a row copies each string once.
pub trait ColumnSink {
    /// A string column's value, or null.
    fn string(&mut self, value: Option<&str>);
    /// An integer column's value, or null.
    fn int(&mut self, value: Option<i64>);
    /// A float column's value, or null.
    fn float(&mut self, value: Option<f64>);
    /// A boolean column's value.
    fn boolean(&mut self, value: bool);
    /// A list-of-strings column's value.
    fn strings(&mut self, values: &[String]);
    /// A nested value as JSON text, or why it could not be written.
    fn json(&mut self, text: Result<String, String>);
}

/// Maps a Rust field type to the column type it is stored as, and writes its values.
pub trait ColumnKind {
    /// The column type for this Rust type.
    const TYPE: ColumnType;
    /// Hands the value to the sink.
    fn write_to(&self, sink: &mut dyn ColumnSink);
}

impl ColumnKind for String {
    const TYPE: ColumnType = ColumnType::Str;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.string(Some(self));
    }
}

impl ColumnKind for Option<String> {
    const TYPE: ColumnType = ColumnType::OptStr;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.string(self.as_deref());
    }
}

impl ColumnKind for i64 {
    const TYPE: ColumnType = ColumnType::Int;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.int(Some(*self));
    }
}

impl ColumnKind for Option<i64> {
    const TYPE: ColumnType = ColumnType::OptInt;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.int(*self);
    }
}

impl ColumnKind for f64 {
    const TYPE: ColumnType = ColumnType::Float;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.float(Some(*self));
    }
}

impl ColumnKind for Option<f64> {
    const TYPE: ColumnType = ColumnType::OptFloat;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.float(*self);
    }
}

impl ColumnKind for bool {
    const TYPE: ColumnType = ColumnType::Bool;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.boolean(*self);
    }
}

impl ColumnKind for Vec<String> {
    const TYPE: ColumnType = ColumnType::StrList;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.strings(self);
    }
}

impl<V: Serialize> ColumnKind for BTreeMap<String, V> {
    const TYPE: ColumnType = ColumnType::Json;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.json(serde_json::to_string(self).map_err(|e| e.to_string()));
    }
}

impl ColumnKind for InstanceId {
    const TYPE: ColumnType = ColumnType::Str;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.string(Some(self.as_str()));
    }
}

/// Columns of a closed set that may be empty: stored as their names, or null.
macro_rules! optional_named_column {
    ($($ty:ty),+) => {
        $(impl ColumnKind for Option<$ty> {
            const TYPE: ColumnType = ColumnType::OptStr;
            fn write_to(&self, sink: &mut dyn ColumnSink) {
                sink.string(self.map(<$ty>::as_str));
            }
        })+
    };
}

optional_named_column!(FailureClass, BuiltBy, DropReason, Relation, Difficulty);

/// Status columns: stored as their names.
macro_rules! status_column {
    ($($ty:ty),+) => {
        $(impl ColumnKind for $ty {
            const TYPE: ColumnType = ColumnType::Str;
            fn write_to(&self, sink: &mut dyn ColumnSink) {
                sink.string(Some(self.as_str()));
            }
        })+
    };
}

status_column!(CandidateStatus, EnvironmentStatus, ValidationStatus);

/// The value a field of a new row starts with: the row's id for the id, the type's default for
/// every other field ([`Row`] types have `new(instance_id)`).
pub trait FieldDefault {
    /// The starting value.
    fn field_default(id: &InstanceId) -> Self;
}

impl<T: Default> FieldDefault for T {
    fn field_default(_: &InstanceId) -> Self {
        T::default()
    }
}

impl FieldDefault for InstanceId {
    fn field_default(id: &InstanceId) -> Self {
        id.clone()
    }
}

/// A row of one table.
pub trait Row: Serialize + serde::de::DeserializeOwned + Clone + Send + Sync + 'static {
    /// Table name, also the name of its JSON Schema file (`schemas/<table>.schema.json`).
    const TABLE: &'static str;
    /// What one row stands for.
    const DOC: &'static str;
    /// The columns, in storage order.
    fn columns() -> Vec<Column>;
    /// The item key of the row: every table is keyed by `instance_id`.
    fn key(&self) -> &str;
    /// The row's instance id.
    fn instance_id(&self) -> &InstanceId;
    /// Writes the row's values to `sink`, one call per column in [`Row::columns`] order.
    fn write_columns(&self, sink: &mut dyn ColumnSink);
}

/// `rows` by instance id, for joining one table's rows to another's: a later row of an id
/// replaces an earlier one.
pub fn rows_by_id<R: Row>(rows: impl IntoIterator<Item = R>) -> BTreeMap<InstanceId, R> {
    rows.into_iter()
        .map(|row| (row.instance_id().clone(), row))
        .collect()
}

/// Declares a table: the row struct, its serde derive and its [`Row`] implementation.
///
/// Every field needs a doc comment, which becomes the column documentation. Field names are the
/// column names (SWE-bench's `FAIL_TO_PASS` included), so no serde renames are needed.
macro_rules! table {
    (
        $(#[doc = $tdoc:literal])*
        pub struct $name:ident in $table:literal {
            $( $(#[doc = $doc:literal])+ pub $field:ident : $ty:ty, )*
        }
    ) => {
        $(#[doc = $tdoc])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        // `allow`, not `expect`: only the tables that carry SWE-bench's upper-case columns
        // (`FAIL_TO_PASS`) trigger the lint.
        #[allow(non_snake_case)]
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl $name {
            /// A row for `instance_id` with every other column empty (zero, false, none).
            #[must_use]
            pub fn new(instance_id: $crate::id::InstanceId) -> Self {
                Self {
                    $( $field: $crate::columns::FieldDefault::field_default(&instance_id), )*
                }
            }
        }

        impl $crate::columns::Row for $name {
            const TABLE: &'static str = $table;
            const DOC: &'static str = concat!($($tdoc, "\n"),*);
            fn columns() -> Vec<$crate::columns::Column> {
                vec![$($crate::columns::Column {
                    name: stringify!($field),
                    ty: <$ty as $crate::columns::ColumnKind>::TYPE,
                    doc: concat!($($doc, "\n"),+),
                }),*]
            }
            fn key(&self) -> &str {
                self.instance_id.as_str()
            }
            fn instance_id(&self) -> &$crate::id::InstanceId {
                &self.instance_id
            }
            fn write_columns(&self, sink: &mut dyn $crate::columns::ColumnSink) {
                $( $crate::columns::ColumnKind::write_to(&self.$field, sink); )*
            }
        }
    };
}

pub(crate) use table;

/// The JSON Schema (draft 2020-12) of one table, generated from its columns.
#[must_use]
pub fn json_schema(table: &str, doc: &str, columns: &[Column]) -> serde_json::Value {
    use serde_json::json;
    let mut properties = serde_json::Map::new();
    for column in columns {
        let ty = match column.ty {
            ColumnType::Str => json!({"type": "string"}),
            ColumnType::OptStr => json!({"type": ["string", "null"]}),
            ColumnType::Int => json!({"type": "integer"}),
            ColumnType::OptInt => json!({"type": ["integer", "null"]}),
            ColumnType::Float => json!({"type": "number"}),
            ColumnType::OptFloat => json!({"type": ["number", "null"]}),
            ColumnType::Bool => json!({"type": "boolean"}),
            ColumnType::StrList => json!({"type": "array", "items": {"type": "string"}}),
            ColumnType::JsonList => json!({
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"type": "array", "items": {"type": "string"}},
            }),
            ColumnType::Json => json!({}),
        };
        let mut ty = ty;
        if let Some(object) = ty.as_object_mut() {
            object.insert("description".into(), json!(column.description()));
            if column.ty == ColumnType::Json {
                object.insert("x-kiln-storage".into(), json!("json-string"));
            }
        }
        properties.insert(column.name.to_string(), ty);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://kiln.dev/schemas/{table}.schema.json"),
        "title": table,
        "description": doc.trim(),
        "x-kiln-schema-version": SCHEMA_VERSION,
        "type": "object",
        "additionalProperties": false,
        "required": columns.iter().map(|c| c.name).collect::<Vec<_>>(),
        "properties": properties,
    })
}
