//! kiln-lm.
