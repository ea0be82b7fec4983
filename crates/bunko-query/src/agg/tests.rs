//! Golden tests of the pipeline stages.
