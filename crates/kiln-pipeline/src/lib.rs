//! kiln-pipeline.
