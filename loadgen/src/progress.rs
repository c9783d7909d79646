//! Progress bars on stderr for the long steps, hidden with `--quiet`.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar counting `len` items, labelled `message`.
pub fn bar(len: u64, quiet: bool, message: &'static str) -> ProgressBar {
    styled(
        ProgressBar::new(len),
        quiet,
        message,
        "{msg:>12} [{bar:40}] {human_pos}/{human_len} ({per_sec}, eta {eta})",
    )
}

/// A bar counting the `len` bytes of a file as they are read.
pub fn bytes(len: u64, quiet: bool, message: &'static str) -> ProgressBar {
    styled(
        ProgressBar::new(len),
        quiet,
        message,
        "{msg:>12} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
    )
}

/// A spinner for waits of unknown length; its message is set as the wait goes on.
pub fn spinner(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

fn styled(bar: ProgressBar, quiet: bool, message: &'static str, template: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    // The templates are constants of this file, so a bad one is a bug caught by any run.
    let style = ProgressStyle::with_template(template).expect("a valid progress template");
    bar.with_style(style.progress_chars("=> ")).with_message(message)
}
