//! [`TestList`]: a list of test ids stored as JSON text, the way princeton-nlp/SWE-bench stores
//! `FAIL_TO_PASS` and `PASS_TO_PASS` (code written for it calls `json.loads` on them).

use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::columns::{ColumnKind, ColumnSink, ColumnType};

/// Test ids, stored as a string holding a JSON list (`["a", "b"]`, Python's `json.dumps`
/// spelling). Reads either that string or a plain list (releases before schema version 9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestList(pub Vec<String>);

impl TestList {
    /// The JSON text, spelled as Python's `json.dumps` spells a list of strings: `", "` between
    /// items, so the column is byte for byte what SWE-bench's own rows hold for ASCII ids.
    #[must_use]
    pub fn to_json(&self) -> String {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|id| serde_json::to_string(id).unwrap_or_default())
            .collect();
        format!("[{}]", items.join(", "))
    }
}

impl Deref for TestList {
    type Target = Vec<String>;
    fn deref(&self) -> &Vec<String> {
        &self.0
    }
}

impl PartialEq<Vec<String>> for TestList {
    fn eq(&self, other: &Vec<String>) -> bool {
        &self.0 == other
    }
}

impl FromIterator<String> for TestList {
    fn from_iter<I: IntoIterator<Item = String>>(ids: I) -> Self {
        Self(ids.into_iter().collect())
    }
}

impl From<Vec<String>> for TestList {
    fn from(ids: Vec<String>) -> Self {
        Self(ids)
    }
}

impl Serialize for TestList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_json())
    }
}

impl<'de> Deserialize<'de> for TestList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Text(String),
            List(Vec<String>),
        }
        match Stored::deserialize(deserializer)? {
            Stored::List(ids) => Ok(Self(ids)),
            Stored::Text(text) => serde_json::from_str(&text)
                .map(Self)
                .map_err(|e| serde::de::Error::custom(format!("not a JSON list of test ids: {e}"))),
        }
    }
}

impl ColumnKind for TestList {
    const TYPE: ColumnType = ColumnType::JsonList;
    fn write_to(&self, sink: &mut dyn ColumnSink) {
        sink.string(Some(&self.to_json()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_stored_as_python_spells_a_json_list_and_read_back_from_text_or_list() {
        let list = TestList(vec!["tests/a.py::test_x".into(), "b \"q\"".into()]);
        let stored = serde_json::to_value(&list).unwrap_or_default();
        assert_eq!(
            stored,
            serde_json::json!("[\"tests/a.py::test_x\", \"b \\\"q\\\"\"]")
        );
        let back: TestList = serde_json::from_value(stored).unwrap_or_default();
        assert_eq!(back, list);
        let from_list: TestList =
            serde_json::from_value(serde_json::json!(["x"])).unwrap_or_default();
        assert_eq!(from_list.0, vec!["x".to_string()]);
        assert_eq!(TestList::default().to_json(), "[]");
        let bad = serde_json::from_value::<TestList>(serde_json::json!("x"));
        assert!(bad.is_err_and(|e| e.to_string().contains("not a JSON list")));
    }
}
