//! Empty: without a build script cargo would not resolve this crate's build-dependencies.
fn main() {}
