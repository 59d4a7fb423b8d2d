//! Parquet files kiln did not write (task files as published on the Hugging Face Hub), read
//! row by row into JSON objects, so that the task file reader treats them as it treats JSONL.
//!
//! Strings, numbers, booleans, lists and structs become their JSON forms; any other type
//! (timestamps, dates, decimals) becomes the text Arrow displays for it, which is what a JSON
//! export of the same dataset holds.

use std::fs::File;
use std::path::Path;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Map, Number, Value};

use crate::error::StoreError;

/// Every row of the Parquet file at `path`, as a JSON object keyed by column name.
///
/// # Errors
/// When the file cannot be opened or is not Parquet.
pub fn read_parquet_objects(path: &Path) -> Result<Vec<Map<String, Value>>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
    let parquet_err = |source| StoreError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(parquet_err)?
        .build()
        .map_err(parquet_err)?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| StoreError::Parquet {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        rows.extend(batch_objects(&batch));
    }
    Ok(rows)
}

/// The rows of one batch.
fn batch_objects(batch: &RecordBatch) -> Vec<Map<String, Value>> {
    let schema = batch.schema();
    let mut rows = vec![Map::new(); batch.num_rows()];
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        for (row, object) in rows.iter_mut().enumerate() {
            object.insert(field.name().clone(), value(column.as_ref(), row));
        }
    }
    rows
}

/// The JSON value of `array[row]`.
fn value(array: &dyn Array, row: usize) -> Value {
    if array.is_null(row) {
        return Value::Null;
    }
    let number = |n: Option<Number>| n.map_or(Value::Null, Value::Number);
    match array.data_type() {
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_string()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(row).to_string()),
        DataType::Utf8View => Value::String(array.as_string_view().value(row).to_string()),
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => Value::from(array.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => Value::from(array.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Value::from(array.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Value::from(array.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::from(array.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => Value::from(array.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => Value::from(array.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => Value::from(array.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => number(Number::from_f64(f64::from(
            array.as_primitive::<Float32Type>().value(row),
        ))),
        DataType::Float64 => number(Number::from_f64(
            array.as_primitive::<Float64Type>().value(row),
        )),
        DataType::List(_) => list(array.as_list::<i32>().value(row).as_ref()),
        DataType::LargeList(_) => list(array.as_list::<i64>().value(row).as_ref()),
        DataType::Struct(fields) => {
            let parts = array.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(parts.columns())
                    .map(|(field, column)| (field.name().clone(), value(column.as_ref(), row)))
                    .collect(),
            )
        }
        _ => ArrayFormatter::try_new(array, &FormatOptions::default())
            .map_or(Value::Null, |f| Value::String(f.value(row).to_string())),
    }
}

fn list(items: &dyn Array) -> Value {
    Value::Array((0..items.len()).map(|i| value(items, i)).collect())
}
