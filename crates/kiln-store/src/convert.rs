//! Rows to Arrow record batches and back, and Parquet files of them.
//!
//! Conversion goes through `serde_json::Value`: a row is serialised, and each column is taken
//! from the resulting object by name. This keeps the conversion generic over every
//! [`Row`] type without code generation; the column list of the row type decides the layout.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, Int64Builder, ListBuilder,
    RecordBatch, StringBuilder,
};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use kiln_schema::{Column, ColumnSink, ColumnType, Row, SCHEMA_VERSION};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::{Map, Value};

use crate::atomic::AtomicFile;
use crate::{error::ConvertError, error::StoreError};

/// Parquet key-value metadata key holding [`SCHEMA_VERSION`].
pub const META_SCHEMA_VERSION: &str = "kiln.schema_version";
/// Parquet key-value metadata key holding the table name ([`Row::TABLE`]).
pub const META_TABLE: &str = "kiln.table";

/// Name of the item field of `list<string>` columns (Arrow's and pyarrow's default).
const LIST_ITEM: &str = "item";

fn list_item_field() -> Arc<Field> {
    Arc::new(Field::new(LIST_ITEM, DataType::Utf8, true))
}

/// The Arrow data type and nullability a column type is stored as.
fn arrow_type(ty: ColumnType) -> (DataType, bool) {
    match ty {
        ColumnType::Str | ColumnType::Json | ColumnType::JsonList => (DataType::Utf8, false),
        ColumnType::OptStr => (DataType::Utf8, true),
        ColumnType::Int => (DataType::Int64, false),
        ColumnType::OptInt => (DataType::Int64, true),
        ColumnType::Float => (DataType::Float64, false),
        ColumnType::OptFloat => (DataType::Float64, true),
        ColumnType::Bool => (DataType::Boolean, false),
        ColumnType::StrList => (DataType::List(list_item_field()), false),
    }
}

/// The Arrow schema of a table with these columns.
///
/// Strings are plain `Utf8` (not `LargeUtf8` or `Utf8View`) so that pyarrow and Hugging Face
/// `datasets` can read and filter the files; `Json` columns hold the JSON text in a `Utf8`
/// column; `StrList` is `List<Utf8>` with a nullable `item` field, as pyarrow writes it.
#[must_use]
pub fn arrow_schema(columns: &[Column]) -> Schema {
    Schema::new(
        columns
            .iter()
            .map(|c| {
                let (ty, nullable) = arrow_type(c.ty);
                Field::new(c.name, ty, nullable)
            })
            .collect::<Vec<_>>(),
    )
}

/// The Arrow schema of `R`'s table, with the schema version and table name as schema metadata.
#[must_use]
pub fn table_schema<R: Row>() -> Schema {
    let metadata = HashMap::from([
        (META_SCHEMA_VERSION.to_string(), SCHEMA_VERSION.to_string()),
        (META_TABLE.to_string(), R::TABLE.to_string()),
    ]);
    arrow_schema(&R::columns()).with_metadata(metadata)
}

/// One column being built.
enum Builder {
    Str(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
    List(ListBuilder<StringBuilder>),
}

impl Builder {
    fn new(ty: ColumnType, capacity: usize) -> Self {
        match ty {
            ColumnType::Str | ColumnType::OptStr | ColumnType::Json | ColumnType::JsonList => {
                Self::Str(StringBuilder::with_capacity(capacity, capacity * 16))
            }
            ColumnType::Int | ColumnType::OptInt => {
                Self::Int(Int64Builder::with_capacity(capacity))
            }
            ColumnType::Float | ColumnType::OptFloat => {
                Self::Float(Float64Builder::with_capacity(capacity))
            }
            ColumnType::Bool => Self::Bool(BooleanBuilder::with_capacity(capacity)),
            ColumnType::StrList => Self::List(
                ListBuilder::with_capacity(StringBuilder::new(), capacity)
                    .with_field(list_item_field()),
            ),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Self::Str(mut b) => Arc::new(b.finish()),
            Self::Int(mut b) => Arc::new(b.finish()),
            Self::Float(mut b) => Arc::new(b.finish()),
            Self::Bool(mut b) => Arc::new(b.finish()),
            Self::List(mut b) => Arc::new(b.finish()),
        }
    }
}

/// The column builders of one batch, written by rows through [`ColumnSink`]: each call fills
/// the next column, and the first value that does not fit its column is kept as the error.
struct BatchSink {
    columns: Vec<Column>,
    builders: Vec<Builder>,
    /// The column the next call fills.
    next: usize,
    /// The first problem: the column's index and what was wrong.
    error: Option<(usize, String)>,
}

impl BatchSink {
    fn new(columns: Vec<Column>, rows: usize) -> Self {
        let builders = columns.iter().map(|c| Builder::new(c.ty, rows)).collect();
        Self {
            columns,
            builders,
            next: 0,
            error: None,
        }
    }

    /// The builder and type of the next column, or `None` when a row wrote more values than
    /// there are columns.
    fn take(&mut self) -> Option<(usize, ColumnType, &mut Builder)> {
        let at = self.next;
        self.next += 1;
        let ty = self.columns.get(at)?.ty;
        Some((at, ty, self.builders.get_mut(at)?))
    }

    fn fail(&mut self, column: usize, message: String) {
        if self.error.is_none() {
            self.error = Some((column, message));
        }
    }

    fn null(&mut self, column: usize, ty: ColumnType) {
        if arrow_type(ty).1 {
            match &mut self.builders[column] {
                Builder::Str(b) => b.append_null(),
                Builder::Int(b) => b.append_null(),
                Builder::Float(b) => b.append_null(),
                Builder::Bool(b) => b.append_null(),
                Builder::List(b) => b.append_null(),
            }
        } else {
            self.fail(column, "missing or null value in a non-null column".into());
        }
    }

    fn mismatch(&mut self, column: usize, ty: ColumnType, got: &str) {
        self.fail(column, format!("a {got} value for a column of type {ty:?}"));
    }
}

impl ColumnSink for BatchSink {
    fn string(&mut self, value: Option<&str>) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match (builder, value) {
            (Builder::Str(b), Some(v)) if ty != ColumnType::Json => b.append_value(v),
            (Builder::Str(_), None) if ty != ColumnType::Json => self.null(at, ty),
            _ => self.mismatch(at, ty, "string"),
        }
    }

    fn int(&mut self, value: Option<i64>) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match (builder, value) {
            (Builder::Int(b), Some(v)) => b.append_value(v),
            (Builder::Int(_), None) => self.null(at, ty),
            _ => self.mismatch(at, ty, "integer"),
        }
    }

    fn float(&mut self, value: Option<f64>) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match (builder, value) {
            (Builder::Float(b), Some(v)) if v.is_finite() => b.append_value(v),
            // NaN and infinities have no JSON form: a nullable column stores null, as rows
            // written through JSON always did; a non-null one refuses them.
            (Builder::Float(_), Some(v)) if ty == ColumnType::Float => self.fail(
                at,
                format!("{v} in a non-null float column (NaN and infinities cannot be stored)"),
            ),
            (Builder::Float(_), _) => self.null(at, ty),
            _ => self.mismatch(at, ty, "float"),
        }
    }

    fn boolean(&mut self, value: bool) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match builder {
            Builder::Bool(b) => b.append_value(value),
            _ => self.mismatch(at, ty, "boolean"),
        }
    }

    fn strings(&mut self, values: &[String]) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match builder {
            Builder::List(b) => {
                for value in values {
                    b.values().append_value(value);
                }
                b.append(true);
            }
            _ => self.mismatch(at, ty, "list"),
        }
    }

    fn json(&mut self, text: Result<String, String>) {
        let Some((at, ty, builder)) = self.take() else {
            return;
        };
        match (builder, text) {
            (Builder::Str(b), Ok(text)) if ty == ColumnType::Json => b.append_value(text),
            (Builder::Str(_), Err(message)) if ty == ColumnType::Json => self.fail(at, message),
            _ => self.mismatch(at, ty, "JSON"),
        }
    }
}

/// Converts rows into one record batch with schema [`table_schema::<R>()`](table_schema). Each
/// row writes its values straight into the column builders ([`Row::write_columns`]).
pub fn rows_to_batch<R: Row>(rows: &[R]) -> Result<RecordBatch, ConvertError> {
    let mut sink = BatchSink::new(R::columns(), rows.len());
    for row in rows {
        sink.next = 0;
        row.write_columns(&mut sink);
        let written = sink.next;
        if let Some((column, message)) = sink.error.take() {
            return Err(ConvertError::BadValue {
                table: R::TABLE,
                key: row.key().to_string(),
                column: sink.columns[column].name,
                message,
            });
        }
        if written != sink.columns.len() {
            return Err(ConvertError::NotAnObject {
                table: R::TABLE,
                message: format!(
                    "a row wrote {written} values for {} columns",
                    sink.columns.len()
                ),
            });
        }
    }
    let arrays: Vec<ArrayRef> = sink.builders.into_iter().map(Builder::finish).collect();
    RecordBatch::try_new(Arc::new(table_schema::<R>()), arrays).map_err(|source| {
        ConvertError::Arrow {
            table: R::TABLE,
            source,
        }
    })
}

/// Appends the values of a `list<string>` column as JSON arrays, one per row.
fn list_values(array: &dyn Array, out: &mut Vec<Value>) -> Result<(), String> {
    let lists = array.as_list::<i32>();
    for i in 0..lists.len() {
        if lists.is_null(i) {
            out.push(Value::Null);
            continue;
        }
        let items = lists.value(i);
        let items = items.as_string::<i32>();
        let mut list = Vec::with_capacity(items.len());
        for j in 0..items.len() {
            if items.is_null(j) {
                return Err(format!("row {i}: null item in a list of strings"));
            }
            list.push(Value::String(items.value(j).to_string()));
        }
        out.push(Value::Array(list));
    }
    Ok(())
}

/// Reads the values of one Arrow column as JSON values, one per row.
fn column_values(
    table: &'static str,
    column: &Column,
    array: &dyn Array,
) -> Result<Vec<Value>, ConvertError> {
    let bad = |message: String| ConvertError::BadColumn {
        table,
        column: column.name.to_string(),
        message,
    };
    let (expected, _) = arrow_type(column.ty);
    let list_of_strings =
        |item: &Field| item.data_type() == &DataType::Utf8 || item.data_type() == &DataType::Null;
    let matches = match (&expected, array.data_type()) {
        (DataType::List(_), DataType::List(item)) => list_of_strings(item),
        // Test lists were `list<string>` before schema version 9; they read as lists.
        (_, DataType::List(item)) if column.ty == ColumnType::JsonList => list_of_strings(item),
        (a, b) => a == b,
    };
    if !matches {
        return Err(bad(format!(
            "stored as {}, expected {expected}",
            array.data_type()
        )));
    }
    let n = array.len();
    let mut out = Vec::with_capacity(n);
    match column.ty {
        ColumnType::Str | ColumnType::OptStr | ColumnType::Json => {
            let strings = array.as_string::<i32>();
            for i in 0..n {
                if strings.is_null(i) {
                    out.push(Value::Null);
                } else if column.ty == ColumnType::Json {
                    let text = strings.value(i);
                    let v = serde_json::from_str(text)
                        .map_err(|e| bad(format!("row {i}: invalid JSON text: {e}")))?;
                    out.push(v);
                } else {
                    out.push(Value::String(strings.value(i).to_string()));
                }
            }
        }
        ColumnType::Int | ColumnType::OptInt => {
            let ints = array.as_primitive::<Int64Type>();
            for i in 0..n {
                out.push(if ints.is_null(i) {
                    Value::Null
                } else {
                    Value::from(ints.value(i))
                });
            }
        }
        ColumnType::Float | ColumnType::OptFloat => {
            let floats = array.as_primitive::<Float64Type>();
            for i in 0..n {
                out.push(if floats.is_null(i) {
                    Value::Null
                } else {
                    Value::from(floats.value(i))
                });
            }
        }
        ColumnType::Bool => {
            let bools = array.as_boolean();
            for i in 0..n {
                out.push(if bools.is_null(i) {
                    Value::Null
                } else {
                    Value::Bool(bools.value(i))
                });
            }
        }
        ColumnType::JsonList if matches!(array.data_type(), DataType::List(_)) => {
            list_values(array, &mut out).map_err(bad)?;
        }
        ColumnType::StrList => list_values(array, &mut out).map_err(bad)?,
        ColumnType::JsonList => {
            let strings = array.as_string::<i32>();
            for i in 0..n {
                out.push(if strings.is_null(i) {
                    Value::Null
                } else {
                    Value::String(strings.value(i).to_string())
                });
            }
        }
    }
    Ok(out)
}

/// Converts a record batch back into rows. Columns are found by name; extra columns are ignored.
pub fn batch_to_rows<R: Row>(batch: &RecordBatch) -> Result<Vec<R>, ConvertError> {
    let columns = R::columns();
    let mut values = Vec::with_capacity(columns.len());
    for column in &columns {
        let Some(array) = batch.column_by_name(column.name) else {
            // A nullable column added after the file was written (a release of an earlier
            // kiln) reads as null, a list column as an empty list; any other is missing.
            if matches!(
                column.ty,
                ColumnType::OptStr | ColumnType::OptInt | ColumnType::OptFloat
            ) {
                values.push(vec![Value::Null; batch.num_rows()].into_iter());
                continue;
            }
            if matches!(column.ty, ColumnType::StrList | ColumnType::JsonList) {
                values.push(vec![Value::Array(Vec::new()); batch.num_rows()].into_iter());
                continue;
            }
            return Err(ConvertError::BadColumn {
                table: R::TABLE,
                column: column.name.to_string(),
                message: "column missing".to_string(),
            });
        };
        values.push(column_values(R::TABLE, column, array.as_ref())?.into_iter());
    }
    let mut rows = Vec::with_capacity(batch.num_rows());
    for index in 0..batch.num_rows() {
        let mut object = Map::with_capacity(columns.len());
        for (column, iter) in columns.iter().zip(values.iter_mut()) {
            object.insert(column.name.to_string(), iter.next().unwrap_or(Value::Null));
        }
        let row =
            serde_json::from_value(Value::Object(object)).map_err(|e| ConvertError::BadRow {
                table: R::TABLE,
                index,
                message: e.to_string(),
            })?;
        rows.push(row);
    }
    Ok(rows)
}

/// Average length above which a string column is written without a dictionary: free text
/// (patches, problem statements, eval scripts) is nearly all distinct, and building a
/// dictionary for it before falling back to plain pages only costs time.
const DICTIONARY_MAX_AVERAGE: usize = 256;

/// Writer properties of every file kiln writes: zstd, with the schema version and table name in
/// the key-value metadata; string columns of long values (in `batches`) without dictionaries.
fn writer_properties(table: &str, batches: &[RecordBatch]) -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(META_SCHEMA_VERSION.to_string(), SCHEMA_VERSION.to_string()),
            KeyValue::new(META_TABLE.to_string(), table.to_string()),
        ]));
    if let Some(first) = batches.first() {
        for (index, field) in first.schema().fields().iter().enumerate() {
            let (mut bytes, mut values) = (0usize, 0usize);
            for batch in batches {
                if let Some(strings) = batch
                    .column(index)
                    .as_any()
                    .downcast_ref::<arrow::array::StringArray>()
                {
                    bytes += strings.value_data().len();
                    values += strings.len() - strings.null_count();
                }
            }
            if values > 0 && bytes / values > DICTIONARY_MAX_AVERAGE {
                builder = builder.set_column_dictionary_enabled(
                    parquet::schema::types::ColumnPath::from(field.name().as_str()),
                    false,
                );
            }
        }
    }
    builder.build()
}

/// Writes record batches of `table` to `path` atomically (temporary file, fsync, rename, fsync
/// of the directory).
pub(crate) fn write_batches(
    path: &Path,
    table: &str,
    schema: SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), StoreError> {
    let (atomic, file) = AtomicFile::create(path)?;
    let parquet_err = |source| StoreError::Parquet {
        path: atomic.temp_path().to_path_buf(),
        source,
    };
    let mut writer = ArrowWriter::try_new(file, schema, Some(writer_properties(table, batches)))
        .map_err(parquet_err)?;
    for batch in batches {
        writer.write(batch).map_err(parquet_err)?;
    }
    // Writes the footer and hands the file back for the fsync.
    let file = writer.into_inner().map_err(parquet_err)?;
    atomic.commit(file)
}

/// Writes rows to a Parquet file atomically. The file carries the schema version and table name
/// in its key-value metadata.
pub fn write_parquet<R: Row>(path: &Path, rows: &[R]) -> Result<(), StoreError> {
    let batch = rows_to_batch(rows).map_err(|source| StoreError::Convert {
        path: path.to_path_buf(),
        source,
    })?;
    write_batches(path, R::TABLE, batch.schema(), &[batch])
}

/// Reads every record batch of a Parquet file of `table`, checking its schema version and table
/// name, and concatenates them into one batch.
pub(crate) fn read_batch(path: &Path, table: &str) -> Result<RecordBatch, StoreError> {
    read_batch_columns(path, table, None)
}

/// [`read_batch`] of only the named columns (all of them with `None`).
pub(crate) fn read_batch_columns(
    path: &Path,
    table: &str,
    columns: Option<&[&str]>,
) -> Result<RecordBatch, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let parquet_err = |source| StoreError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
    let metadata = builder.metadata().file_metadata().key_value_metadata();
    let get = |key: &str| {
        metadata
            .and_then(|kv| kv.iter().find(|e| e.key == key))
            .and_then(|e| e.value.clone())
    };
    let version = get(META_SCHEMA_VERSION);
    if version.as_deref() != Some(SCHEMA_VERSION.to_string().as_str()) {
        return Err(StoreError::SchemaVersion {
            path: path.to_path_buf(),
            found: version.unwrap_or_else(|| "none".to_string()),
            expected: SCHEMA_VERSION,
        });
    }
    let found_table = get(META_TABLE).unwrap_or_default();
    if found_table != table {
        return Err(StoreError::TableMismatch {
            path: path.to_path_buf(),
            found: found_table,
            expected: table.to_string(),
        });
    }
    let builder = match columns {
        Some(columns) => {
            let mask = parquet::arrow::ProjectionMask::columns(
                builder.parquet_schema(),
                columns.iter().copied(),
            );
            builder.with_projection(mask)
        }
        None => builder,
    };
    let reader = builder.build().map_err(parquet_err)?;
    let schema = arrow::array::RecordBatchReader::schema(&reader);
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| StoreError::Arrow {
            path: path.to_path_buf(),
            source,
        })?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|source| StoreError::Arrow {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the rows of a Parquet file written by [`write_parquet`] (or any file of the same table
/// and schema version). A file of another schema version or table is an error naming both.
pub fn read_parquet<R: Row>(path: &Path) -> Result<Vec<R>, StoreError> {
    let batch = read_batch(path, R::TABLE)?;
    batch_to_rows(&batch).map_err(|source| StoreError::Convert {
        path: path.to_path_buf(),
        source,
    })
}

/// Number of rows of a Parquet file, from its footer.
pub(crate) fn parquet_rows(path: &Path) -> Result<usize, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| StoreError::Parquet {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0))
}
