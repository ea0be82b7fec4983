//! Unit tests of the expression evaluator.
