//! What loadgen's command-line tests share: running the built `loadgen` and reading its errors.
#![allow(dead_code, reason = "each test crate uses a part of it")]

use std::process::{Command, Output};

/// Runs the built `loadgen` with `args` and waits for it.
pub fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("run loadgen")
}

/// Its standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
