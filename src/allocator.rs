//! Memory settings of the `kube-gc run` process, made once at its start, and of the loadgen
//! replays that measure it, so that their figures are the ones it shows.
//!
//! The collector's heap is mimalloc's, which asks the kernel for transparent huge pages on its
//! arenas. A huge page is resident whole from its first touch, so while the graph grows, each
//! arena's partly used 2 MiB regions count in full. Measured with `loadgen sync --preset 1m`
//! (README, "`kube-gc run`"), turning them off lowered the collector's peak resident set from
//! 334–340 MB to 304–310 MB at the same CPU time (4.6–4.9 s); mimalloc's purge delay (1 s by
//! default, tried at 0) made no difference to the peak, so it is left alone. The simulated API
//! server keeps them.

/// Turns transparent huge pages off for this process (Linux), pages already mapped included from
/// their next fault. A kernel that refuses is not an error: the process only keeps more resident.
pub fn no_huge_pages() {
    if let Err(e) = raw::disable_thp() {
        tracing::debug!(error = %e, "transparent huge pages stay on");
    }
}

mod raw {
    /// `prctl(PR_SET_THP_DISABLE, 1)`.
    #[cfg(target_os = "linux")]
    pub(super) fn disable_thp() -> std::io::Result<()> {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and no pointer; it only sets a flag of
        // this process's memory map.
        let done = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if done == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn disable_thp() -> std::io::Result<()> {
        Ok(())
    }
}
