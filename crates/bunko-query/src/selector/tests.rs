//! Unit tests of the selector pipeline.
