//! The machine's cost of a random memory load by working-set size, to read the scale curve
//! against.
//!
//! A builder's event looks its UID up in a hashed map, so at least one of the lines it touches is
//! at a random place in the graph, whatever the graph's layout. Once the graph outgrows the
//! caches, what an event costs follows what a random load costs at the graph's size, and that is
//! the machine's, not kube-gc's: the page walks, the memory behind the virtual machine, the
//! host's other tenants. [`measure`] times two figures per size, in the process's own page
//! setting (loadgen turns transparent huge pages off, as `kube-gc run` does):
//!
//! - **one at a time:** each load's address is the value the load before read, so nothing
//!   overlaps: the latency of one miss;
//! - **eight at once:** eight such chains interleaved, as the builders' lookahead overlaps the
//!   lookups of eight events: the cost a load when the processor can keep several in flight.
//!
//! Invariant: a chain visits every 64-byte line of its buffer once before it repeats (a
//! full-period linear congruential sequence over a power-of-two line count), so no chain settles
//! into a cycle short enough to live in cache, and the hardware prefetchers, which follow
//! strides, cannot guess the next line.

use std::hint::black_box;
use std::time::Instant;

/// Words in a 64-byte line: each line holds, in its first word, the index of the next line's.
const WORDS_PER_LINE: usize = 8;

/// Chains interleaved by the "eight at once" figure.
const CHAINS: usize = 8;

/// One size's figures.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Probe {
    /// The buffer's size: a power of two.
    pub bytes: usize,
    /// Nanoseconds a load, each waiting for the one before.
    pub one_at_a_time_ns: f64,
    /// Nanoseconds a load, eight chains interleaved.
    pub eight_at_once_ns: f64,
}

/// The line after `line` in a chain over `lines` lines (a power of two): a full-period linear
/// congruential step (Hull–Dobell: the multiplier is 1 mod 4, the increment odd).
fn next_line(line: usize, lines: usize) -> usize {
    line.wrapping_mul(6_364_136_223_846_793_005_u64 as usize)
        .wrapping_add(1_442_695_040_888_963_407_u64 as usize)
        & (lines - 1)
}

/// A buffer of `lines` lines, each line's first word the word index of the next line's first
/// word; written in address order, so it is resident before the timing starts.
fn chain(lines: usize) -> Vec<usize> {
    let mut words = vec![0usize; lines * WORDS_PER_LINE];
    for line in 0..lines {
        words[line * WORDS_PER_LINE] = next_line(line, lines) * WORDS_PER_LINE;
    }
    words
}

/// Times `loads` loads over a buffer of `bytes` (rounded down to a power of two, at least a
/// page), one chain at a time, then eight interleaved.
pub fn probe(bytes: usize, loads: usize) -> Probe {
    let lines = 1usize << (bytes.max(4096) / 64).ilog2();
    let words = chain(lines);
    Probe {
        bytes: lines * 64,
        one_at_a_time_ns: chase::<1>(&words, lines, loads),
        eight_at_once_ns: chase::<CHAINS>(&words, lines, loads),
    }
}

/// Nanoseconds a load over `words` (a [`chain`] of `lines` lines), `N` chains interleaved, for
/// about `loads` loads in all. The chains start spread over the buffer, so they do not trail one
/// another.
fn chase<const N: usize>(words: &[usize], lines: usize, loads: usize) -> f64 {
    let mut ats: [usize; N] = std::array::from_fn(|i| i * (lines / N) * WORDS_PER_LINE);
    let rounds = (loads / N).max(1);
    let started = Instant::now();
    for _ in 0..rounds {
        for at in &mut ats {
            *at = words[*at];
        }
    }
    let ns = started.elapsed().as_secs_f64() * 1e9 / (rounds * N) as f64;
    black_box(ats);
    ns
}

/// [`probe`] at each size in `bytes`, in order, one buffer at a time (each freed before the next
/// is built, so the largest alone bounds the memory taken), handing each to `each` as it ends,
/// since the largest take seconds to build. The caller has [`check`]ed the sizes.
pub fn measure(
    bytes: &[usize],
    loads: usize,
    mut each: impl FnMut(&Probe) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Probe>> {
    bytes
        .iter()
        .map(|&b| {
            let probe = probe(b, loads);
            each(&probe).map(|()| probe)
        })
        .collect()
}

/// Refuses a size beyond the memory the kernel says is available, before [`measure`] builds any:
/// a buffer that large would end in the kernel killing the process rather than in an error.
pub fn check(bytes: &[usize]) -> anyhow::Result<()> {
    if let (Some(&largest), Some(available)) = (bytes.iter().max(), available_bytes()) {
        anyhow::ensure!(
            largest as u64 <= available,
            "a working set of {} MiB is more than the {} MiB of memory available",
            largest >> 20,
            available >> 20
        );
    }
    Ok(())
}

/// `MemAvailable` of `/proc/meminfo`, where there is one.
fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_should_visit_every_line_once_before_it_repeats() {
        for lines in [64, 1024, 1 << 16] {
            let words = chain(lines);
            let mut seen = vec![false; lines];
            let mut at = 0;
            for _ in 0..lines {
                let line = at / WORDS_PER_LINE;
                assert!(!seen[line], "line {line} of {lines} visited twice");
                seen[line] = true;
                at = words[at];
            }
            assert_eq!(at, 0, "the chain closes after {lines} lines");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_size_beyond_the_available_memory_should_be_refused_before_any_is_built() {
        let available = available_bytes().expect("Linux's /proc/meminfo has MemAvailable");
        let too_large = usize::try_from(available * 2).expect("a 64-bit machine");
        let err = check(&[1 << 20, too_large]).expect_err("refused");
        assert!(err.to_string().contains("more than the"), "{err}");
    }

    #[test]
    fn a_probe_should_round_its_size_down_to_a_power_of_two_and_time_every_figure() {
        let probe = probe(3 << 20, 100_000);
        assert_eq!(probe.bytes, 2 << 20);
        for ns in [probe.one_at_a_time_ns, probe.eight_at_once_ns] {
            assert!(ns.is_finite() && ns > 0.0, "{probe:?}");
        }
    }
}
