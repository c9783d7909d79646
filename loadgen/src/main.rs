//! `loadgen`: generates, records and replays watch streams for kube-gc.
//!
//! The commands arrive with the stream tooling; until then the binary only says so.

fn main() {
    eprintln!("loadgen: no commands yet; see the README for the kube-gc commands available today");
    std::process::exit(2);
}
