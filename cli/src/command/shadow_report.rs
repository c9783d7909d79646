//! `kube-gc shadow-report JOURNAL…`: what a shadow collector (`kube-gc run --dry-run`) decided,
//! against what the live collector did as the shadow's watches saw it
//! ([`kube_gc::journal::report`]).

use kube_gc::journal::{self, report::Report};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ShadowReportArgs {
    /// The shadow's journal files (`--journal`), rotated ones (PATH.2, PATH.1) before the current
    /// one.
    #[arg(required = true, value_name = "JOURNAL")]
    journals: Vec<PathBuf>,
    /// `text`, or `json`: the agreed writes and both kinds of difference, each with its line.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
    /// Exit with status 1 when the two sides differ.
    #[arg(long)]
    fail_on_difference: bool,
}

pub fn run(args: ShadowReportArgs) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    for path in &args.journals {
        entries.extend(journal::read(path).map_err(anyhow::Error::msg)?);
    }
    let report = Report::compare(&entries);
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    if args.fail_on_difference && !report.agrees() {
        std::process::exit(1);
    }
    Ok(())
}
