//! Row <-> Arrow <-> Parquet conversion and the checked-in Arrow schemas.

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema};
use kiln_schema::{Row, SCHEMA_VERSION};
use kiln_store::{
    StoreError, arrow_schema, batch_to_rows, read_parquet, rows_to_batch, table_schema,
    write_parquet,
};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::samples;

fn round_trip<R: Row + PartialEq + std::fmt::Debug>(rows: Vec<R>) {
    let batch = rows_to_batch(&rows).unwrap();
    assert_eq!(batch.num_rows(), rows.len());
    assert_eq!(batch.schema().fields(), table_schema::<R>().fields());
    let back: Vec<R> = batch_to_rows(&batch).unwrap();
    assert_eq!(back, rows, "batch round trip of {}", R::TABLE);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{}.parquet", R::TABLE));
    write_parquet(&path, &rows).unwrap();
    let back: Vec<R> = read_parquet(&path).unwrap();
    assert_eq!(back, rows, "parquet round trip of {}", R::TABLE);
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn every_table_round_trips() {
    let mut covered = Vec::new();

    let mut c2 = samples::candidate("b__c-2");
    c2.status = kiln_schema::CandidateStatus::Error;
    c2.error = Some("line 3: bad JSON".into());
    c2.pull_number = None;
    c2.version = None;
    c2.language = Some("python".into());
    c2.given_pass_to_pass = vec!["x".into(); 3];
    round_trip(vec![samples::candidate("a__b-1"), c2]);
    covered.push(kiln_schema::Candidate::TABLE);

    let mut v2 = samples::verdict("b");
    v2.keep = true;
    v2.prompt_tokens = None;
    v2.completion_tokens = Some(i64::MIN);
    round_trip(vec![samples::verdict("a"), v2]);
    covered.push(kiln_schema::Verdict::TABLE);

    let mut p2 = samples::platform_label("b");
    p2.evidence.clear();
    round_trip(vec![samples::platform_label("a"), p2]);
    covered.push(kiln_schema::PlatformLabel::TABLE);

    let mut e2 = samples::environment("b");
    e2.status = kiln_schema::EnvironmentStatus::Failed;
    e2.failure_class = Some(kiln_schema::FailureClass::Build);
    e2.failure_command = Some("pip install .".into());
    e2.image = None;
    e2.baseline.clear();
    e2.setup_seconds = -0.0;
    round_trip(vec![samples::environment("a"), e2]);
    covered.push(kiln_schema::EnvironmentRecord::TABLE);

    let mut va2 = samples::validation("b");
    va2.status = kiln_schema::ValidationStatus::Rejected;
    va2.failure_class = Some(kiln_schema::FailureClass::NoFailToPass);
    va2.flaky.clear();
    va2.runs.insert(
        "after:1".into(),
        [("exit".to_string(), "0".to_string())].into(),
    );
    round_trip(vec![samples::validation("a"), va2]);
    covered.push(kiln_schema::ValidationRecord::TABLE);

    let mut r2 = samples::release("b", "y");
    r2.pull_number = None;
    r2.dockerfile = None;
    round_trip(vec![samples::release("a", "x"), r2]);
    covered.push(kiln_schema::ReleaseInstance::TABLE);

    // Empty tables too.
    round_trip(Vec::<kiln_schema::Verdict>::new());

    let all: Vec<&str> = kiln_schema::all_tables().iter().map(|t| t.0).collect();
    assert_eq!(
        covered, all,
        "a table was added to kiln-schema: add sample rows to this test"
    );
}

#[test]
fn non_finite_float_is_a_clear_error() {
    let mut e = samples::environment("a__b-1");
    e.test_seconds = f64::NAN;
    let err = rows_to_batch(&[e]).unwrap_err().to_string();
    assert!(err.contains("test_seconds"), "{err}");
    assert!(err.contains("a__b-1"), "{err}");
    assert!(err.contains("NaN"), "{err}");
}

/// Readable, version-independent rendering of an Arrow type.
fn type_text(ty: &DataType) -> String {
    match ty {
        DataType::Utf8 => "string".into(),
        DataType::Int64 => "int64".into(),
        DataType::Float64 => "double".into(),
        DataType::Boolean => "bool".into(),
        DataType::List(item) => format!(
            "list<{}: {}{}>",
            item.name(),
            type_text(item.data_type()),
            if item.is_nullable() { "" } else { " not null" }
        ),
        other => format!("{other:?}"),
    }
}

fn schema_text(columns: &[kiln_schema::Column]) -> String {
    let schema: Schema = arrow_schema(columns);
    let mut out = String::new();
    for (field, column) in schema.fields().iter().zip(columns) {
        let _ = writeln!(
            out,
            "  {}: {}{}{}",
            field.name(),
            type_text(field.data_type()),
            if field.is_nullable() { "" } else { " not null" },
            match column.ty {
                kiln_schema::ColumnType::Json => "  (JSON text)",
                kiln_schema::ColumnType::JsonList => "  (JSON list text)",
                _ => "",
            }
        );
    }
    out
}

/// The Arrow schema of every table must match `tests/data/arrow-schemas.txt`. A change of a
/// stored schema is a format change: bump `SCHEMA_VERSION` and re-bless with `KILN_BLESS=1`.
#[test]
fn arrow_schemas_are_stable() {
    let mut text = format!(
        "# Arrow schemas of every kiln table (schema version {SCHEMA_VERSION}).\n\
         # Regenerate with: KILN_BLESS=1 cargo test -p kiln-store --test it arrow_schemas\n"
    );
    for (table, _, columns) in kiln_schema::all_tables() {
        let _ = write!(text, "\ntable {table}\n{}", schema_text(&columns));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/arrow-schemas.txt");
    if std::env::var_os("KILN_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != text {
        let mut diff = String::new();
        let old: Vec<&str> = expected.lines().collect();
        let new: Vec<&str> = text.lines().collect();
        for i in 0..old.len().max(new.len()) {
            match (old.get(i), new.get(i)) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => {
                    if let Some(a) = a {
                        let _ = writeln!(diff, "line {}: - {a}", i + 1);
                    }
                    if let Some(b) = b {
                        let _ = writeln!(diff, "line {}: + {b}", i + 1);
                    }
                }
            }
        }
        panic!(
            "Arrow schemas drifted from {} (- checked in, + now):\n{diff}\n\
             If intended, bump kiln_schema::SCHEMA_VERSION and rerun with KILN_BLESS=1.",
            path.display()
        );
    }
}

/// Writes a Parquet file of verdicts with the given key-value metadata.
fn write_with_metadata(path: &Path, version: &str, table: &str) {
    let batch = rows_to_batch(&[samples::verdict("a")]).unwrap();
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![
            KeyValue::new("kiln.schema_version".to_string(), version.to_string()),
            KeyValue::new("kiln.table".to_string(), table.to_string()),
        ]))
        .build();
    let file = File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn other_schema_version_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.parquet");
    write_with_metadata(&path, "0", "verdict");
    let err = read_parquet::<kiln_schema::Verdict>(&path).unwrap_err();
    assert!(matches!(err, StoreError::SchemaVersion { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("old.parquet"), "{msg}");
    assert!(msg.contains("schema version 0"), "{msg}");
    assert!(
        msg.contains(&format!("reads version {SCHEMA_VERSION}")),
        "{msg}"
    );

    // The right version reads fine.
    let good = dir.path().join("good.parquet");
    write_with_metadata(&good, &SCHEMA_VERSION.to_string(), "verdict");
    assert_eq!(
        read_parquet::<kiln_schema::Verdict>(&good).unwrap().len(),
        1
    );
}

#[test]
fn other_table_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.parquet");
    write_parquet(&path, &[samples::verdict("a")]).unwrap();
    let err = read_parquet::<kiln_schema::PlatformLabel>(&path).unwrap_err();
    assert!(matches!(err, StoreError::TableMismatch { .. }), "{err}");
}

#[test]
fn file_without_kiln_metadata_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.parquet");
    let batch = rows_to_batch(&[samples::verdict("a")]).unwrap();
    let schema = Arc::new(Schema::new(batch.schema().fields().clone()));
    let batch =
        arrow::array::RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).unwrap();
    let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let err = read_parquet::<kiln_schema::Verdict>(&path).unwrap_err();
    assert!(err.to_string().contains("schema version none"), "{err}");
}

/// Free text is written without a dictionary (nearly every value differs), short repeated
/// strings with one; both read back the same.
#[test]
fn long_text_columns_skip_the_dictionary() {
    let rows: Vec<kiln_schema::ReleaseInstance> = (0..50)
        .map(|i| {
            let mut r = samples::release(&format!("o__r-{i}"), "o/r");
            r.patch = format!("{i}:").repeat(400);
            r
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("release.parquet");
    write_parquet(&path, &rows).unwrap();
    let reader =
        parquet::file::reader::SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
    let metadata = parquet::file::reader::FileReader::metadata(&reader);
    let group = metadata.row_group(0);
    let dictionary = |name: &str| {
        group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .unwrap_or_else(|| panic!("no column {name}"))
            .dictionary_page_offset()
            .is_some()
    };
    assert!(!dictionary("patch"));
    assert!(dictionary("repo"));
    assert_eq!(
        read_parquet::<kiln_schema::ReleaseInstance>(&path).unwrap(),
        rows
    );
}
