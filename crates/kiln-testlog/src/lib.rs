//! kiln-testlog.
