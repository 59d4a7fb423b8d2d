//! Names kiln uses as path components: dataset names, run ids, stage names.

use std::path::Path;

use crate::error::StoreError;

/// Checks that `name` is usable as one path component.
pub(crate) fn check_component(parent: &Path, what: &str, name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(StoreError::invalid(
            parent,
            format!("{what} {name:?} is not a valid file name"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components() {
        let p = Path::new("p");
        assert!(check_component(p, "x", "a__b-1").is_ok());
        for bad in ["", ".", "..", "a/b", ".hidden", "a\\b"] {
            assert!(check_component(p, "x", bad).is_err(), "{bad:?}");
        }
    }
}
