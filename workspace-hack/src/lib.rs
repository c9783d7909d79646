//! No code: this crate exists for its manifest (see Cargo.toml).
