//! Heavy tests of [`WorkQueue`] under real parallelism, all `#[ignore]`d: run them with
//! `cargo test --release --lib queue::stress -- --ignored --nocapture`.
//!
//! The stress test checks conservation (every add that was not merged is processed exactly once,
//! and no add is lost) and exclusion (no item is held by two consumers at once). Per-operation
//! costs are measured by the `work_queue` bench, not here.

use super::{RateLimiterConfig, WorkQueue};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const PRODUCERS: usize = 4;
const CONSUMERS: usize = 4;
/// Distinct items; producers add overlapping ranges of them so that adds merge and collide with
/// consumers that hold the item.
const ITEMS: usize = 1_000;
const ADDS_PER_PRODUCER: usize = 1_000_000;

/// Per-item bookkeeping of the stress test.
struct Ledger {
    /// Bumped by a producer just before each of its adds of the item.
    added: Vec<AtomicU64>,
    /// The value of `added` that the latest processing round of the item saw when it began.
    seen: Vec<AtomicU64>,
    /// Set while a consumer holds the item.
    held: Vec<AtomicBool>,
    /// Processing rounds, all items together.
    rounds: AtomicU64,
}

impl Ledger {
    fn new() -> Self {
        Ledger {
            added: (0..ITEMS).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..ITEMS).map(|_| AtomicU64::new(0)).collect(),
            held: (0..ITEMS).map(|_| AtomicBool::new(false)).collect(),
            rounds: AtomicU64::new(0),
        }
    }
}

/// A small xorshift generator, so that each thread gets its own reproducible sequence.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn produce(q: &Arc<WorkQueue<u32>>, ledger: &Ledger, runtime: &tokio::runtime::Handle, id: usize) {
    // Delayed adds spawn the queue's delivery task, so they need a runtime context.
    let _entered = runtime.enter();
    let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1);
    for _ in 0..ADDS_PER_PRODUCER {
        let r = next(&mut seed);
        let item = (r % ITEMS as u64) as u32;
        ledger.added[item as usize].fetch_add(1, Ordering::SeqCst);
        if r.is_multiple_of(64) {
            q.add_after(item, Duration::from_micros(r % 500));
        } else {
            q.add(item);
        }
    }
}

async fn consume(q: Arc<WorkQueue<u32>>, ledger: Arc<Ledger>) {
    while let Some(item) = q.get().await {
        let i = item as usize;
        assert!(
            !ledger.held[i].swap(true, Ordering::SeqCst),
            "item {item} handed to a second consumer while held"
        );
        ledger.seen[i].store(ledger.added[i].load(Ordering::SeqCst), Ordering::SeqCst);
        ledger.rounds.fetch_add(1, Ordering::Relaxed);
        if item % 7 == 0 {
            tokio::task::yield_now().await;
        }
        ledger.held[i].store(false, Ordering::SeqCst);
        q.done(&item);
    }
}

#[test]
#[ignore = "stress: run with --release -- --ignored"]
fn four_producers_and_four_consumers_should_process_every_add_once_and_never_share_an_item() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("test runtime");
    let q = WorkQueue::new("stress", RateLimiterConfig::default());
    let ledger = Arc::new(Ledger::new());

    // Consumers are OS threads of their own, each driving its `get` loop with `block_on`.
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (q, ledger, handle) = (q.clone(), ledger.clone(), runtime.handle().clone());
            thread::spawn(move || handle.block_on(consume(q, ledger)))
        })
        .collect();
    let start = Barrier::new(PRODUCERS);
    thread::scope(|s| {
        for id in 0..PRODUCERS {
            let (q, ledger, handle, start) = (&q, &ledger, runtime.handle(), &start);
            s.spawn(move || {
                start.wait();
                produce(q, ledger, handle, id);
            });
        }
    });

    let deadline = Instant::now() + Duration::from_secs(60);
    while !q.is_idle() {
        assert!(Instant::now() < deadline, "likely deadlocked: the queue never drained");
        thread::sleep(Duration::from_millis(1));
    }
    q.shut_down();
    for consumer in consumers {
        assert!(consumer.join().is_ok(), "a consumer panicked (see above)");
    }

    let stats = q.stats();
    println!(
        "{} adds, {} not merged, {} retries, {} rounds",
        PRODUCERS * ADDS_PER_PRODUCER,
        stats.adds_total,
        stats.retries_total,
        ledger.rounds.load(Ordering::SeqCst)
    );
    assert_eq!(
        ledger.rounds.load(Ordering::SeqCst),
        stats.adds_total,
        "every add that was not merged is processed exactly once"
    );
    for i in 0..ITEMS {
        let (added, seen) = (
            ledger.added[i].load(Ordering::SeqCst),
            ledger.seen[i].load(Ordering::SeqCst),
        );
        assert_eq!(seen, added, "item {i}: its last add was never processed");
    }
    assert_eq!((stats.depth, stats.processing, stats.delayed), (0, 0, 0));
}
