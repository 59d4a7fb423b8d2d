//! kiln-validate.
