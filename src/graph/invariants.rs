//! Graph invariant checks for tests.
