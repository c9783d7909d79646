//! Heavy tests of [`WorkQueue`] under real parallelism, all `#[ignore]`d: run them with
//! `cargo test --release --lib queue::stress -- --ignored --nocapture`.
//!
//! The stress test checks conservation (every add that was not merged is processed exactly once,
//! and no add is lost) and exclusion (no item is held by two consumers at once). The timing test
//! prints rough per-operation costs; it asserts nothing about speed (STYLE.md rule 14).

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

/// Runs `f` five times and returns the median of its duration per operation, in nanoseconds.
fn median_ns(ops: usize, mut f: impl FnMut() -> Duration) -> f64 {
    let mut runs: Vec<f64> = (0..5).map(|_| f().as_nanos() as f64 / ops as f64).collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

#[test]
#[ignore = "timing: run with --release -- --ignored --nocapture"]
fn add_get_done_timing() {
    const N: usize = 200_000;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("test runtime");
    let new_queue = || WorkQueue::<u32>::new("timing", RateLimiterConfig::default());

    let add_new = median_ns(N, || {
        let q = new_queue();
        let t = Instant::now();
        (0..N as u32).for_each(|i| q.add(i));
        t.elapsed()
    });
    let add_merged = median_ns(N, || {
        let q = new_queue();
        (0..N as u32).for_each(|i| q.add(i));
        let t = Instant::now();
        (0..N as u32).for_each(|i| q.add(i));
        t.elapsed()
    });
    let get_done = median_ns(N, || {
        let q = new_queue();
        (0..N as u32).for_each(|i| q.add(i));
        let t = Instant::now();
        runtime.block_on(async {
            for _ in 0..N {
                let item = q.get().await.expect("queued");
                q.done(&item);
            }
        });
        t.elapsed()
    });
    let cycle = |distinct: u32| {
        median_ns(N, || {
            let q = new_queue();
            let t = Instant::now();
            runtime.block_on(async {
                for i in 0..N as u32 {
                    q.add(i % distinct);
                    let item = q.get().await.expect("queued");
                    q.done(&item);
                }
            });
            t.elapsed()
        })
    };
    let (cycle_new, cycle_reused) = (cycle(u32::MAX), cycle(64));
    let contended = median_ns(N, || contended_run(N));
    println!(
        "uncontended, ns per op: add (new item) {add_new:.0}, add (merged) {add_merged:.0}, get+done {get_done:.0}, \
         add+get+done of a new item {cycle_new:.0}, of one of 64 items {cycle_reused:.0}"
    );
    println!("contended (2 producer threads, 2 consumer tasks on 2 workers), ns per item: {contended:.0}");
}

/// Two producer threads add `n` distinct items between them while two consumer tasks take them.
fn contended_run(n: usize) -> Duration {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("test runtime");
    let q = WorkQueue::<u32>::new("timing", RateLimiterConfig::default());
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let (q, done) = (q.clone(), done.clone());
            runtime.spawn(async move {
                while let Some(item) = q.get().await {
                    q.done(&item);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    thread::scope(|s| {
        for half in 0..2u32 {
            let q = &q;
            s.spawn(move || (0..n as u32 / 2).for_each(|i| q.add(i * 2 + half)));
        }
    });
    while done.load(Ordering::Relaxed) < n as u64 {
        std::hint::spin_loop();
    }
    let elapsed = t.elapsed();
    q.shut_down();
    for consumer in consumers {
        runtime.block_on(consumer).expect("consumer task");
    }
    elapsed
}
