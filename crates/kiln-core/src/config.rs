//! Pipeline configuration (written next).
