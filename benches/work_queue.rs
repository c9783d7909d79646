//! Throughput of `WorkQueue` add → get → done with 1, 2 and 4 producer/consumer thread pairs,
//! against a plain unbounded crossbeam channel moving the same items (no dedup, no bookkeeping).
//!
//! Regimes: one group per number of pairs (`1_pair` is uncontended apart from the hand-off;
//! `4_pairs` puts eight threads on a 2-core machine). Each iteration is one item added; the time
//! runs from the moment every thread is released until the last consumer has drained the queue.
//! Items are `u64`; every [`DUPLICATE_EVERY`]th add re-adds one of [`HOT_ITEMS`] items shared by
//! all producers, so the queue's dedup (merge while queued, dirty while held) is exercised. The
//! channel delivers duplicates as separate items, as it would.
//!
//! A last regime, `retry_round`, is one thread on a current-thread runtime with tokio's clock
//! paused: each item is added rate-limited (a failure), delivered by the timer task, then taken,
//! forgotten (a success) and done. It prices what a retry costs beyond add/get/done: the rate
//! limiter's per-item record, the delayed add's entry and the success count.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kube_gc::queue::{RateLimiterConfig, WorkQueue, ATTEMPT_TO_DELETE};
use std::sync::Arc;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// The binary's allocator, so the figures are the ones kube-gc would show.
#[global_allocator]
static GLOBAL: kube_gc::allocator::Allocator = kube_gc::allocator::Allocator;

/// One add in this many is a duplicate (25 %).
const DUPLICATE_EVERY: u64 = 4;
/// How many distinct items the duplicates are drawn from.
const HOT_ITEMS: u64 = 64;

/// The `n`th item producer `p` adds: unique, or one of the hot items every producer re-adds.
fn item(p: usize, n: u64) -> u64 {
    if n % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 {
        u64::MAX - (n / DUPLICATE_EVERY) % HOT_ITEMS
    } else {
        ((p as u64) << 48) | n
    }
}

/// The share of `total` adds that producer `p` of `pairs` makes.
fn share(total: u64, pairs: usize, p: usize) -> u64 {
    total / pairs as u64 + u64::from((p as u64) < total % pairs as u64)
}

/// Runs `pairs` producers and `pairs` consumers over a fresh queue until `total` adds have been
/// made and every queued item handled; returns the time from release to the last consumer's exit.
fn run_work_queue(pairs: usize, total: u64) -> Duration {
    let queue = WorkQueue::<u64>::new(ATTEMPT_TO_DELETE, RateLimiterConfig::default());
    let start = Barrier::new(2 * pairs + 1);
    thread::scope(|s| {
        let producers: Vec<_> = (0..pairs)
            .map(|p| {
                let (queue, start) = (&queue, &start);
                s.spawn(move || {
                    start.wait();
                    for n in 0..share(total, pairs, p) {
                        queue.add(item(p, n));
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..pairs)
            .map(|_| {
                let (queue, start) = (&queue, &start);
                s.spawn(move || {
                    start.wait();
                    // One executor for the whole loop: `get` parks this thread when the queue
                    // is empty, and an add wakes it.
                    futures::executor::block_on(async {
                        while let Some(item) = queue.get().await {
                            queue.done(&black_box(item));
                        }
                    })
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        for p in producers {
            p.join().expect("a producer");
        }
        // Consumers drain what is left, then `get` answers `None`.
        queue.shut_down();
        for c in consumers {
            c.join().expect("a consumer");
        }
        began.elapsed()
    })
}

/// The same traffic through an unbounded crossbeam channel.
fn run_channel(pairs: usize, total: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::unbounded::<u64>();
    let start = Barrier::new(2 * pairs + 1);
    thread::scope(|s| {
        let producers: Vec<_> = (0..pairs)
            .map(|p| {
                let (tx, start) = (tx.clone(), &start);
                s.spawn(move || {
                    start.wait();
                    for n in 0..share(total, pairs, p) {
                        tx.send(item(p, n)).expect("a receiver");
                    }
                })
            })
            .collect();
        drop(tx);
        let consumers: Vec<_> = (0..pairs)
            .map(|_| {
                let (rx, start) = (rx.clone(), &start);
                s.spawn(move || {
                    start.wait();
                    // Ends when every sender is gone and the channel is empty.
                    for item in rx {
                        black_box(item);
                    }
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        for t in producers.into_iter().chain(consumers) {
            t.join().expect("a channel thread");
        }
        began.elapsed()
    })
}

/// `total` items through one failed and one successful round each (see the module docs); the
/// time from the first add to the last `done`. The shared retry bucket is off, so the per-item
/// backoff (5 ms of paused time) is the only wait.
fn run_retry_round(total: u64) -> Duration {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let queue: Arc<WorkQueue<u64>> = WorkQueue::new(
            ATTEMPT_TO_DELETE,
            RateLimiterConfig {
                qps: 0.0,
                ..RateLimiterConfig::default()
            },
        );
        let began = Instant::now();
        for n in 0..total {
            queue.add_rate_limited(n);
        }
        for _ in 0..total {
            let item = queue.get().await.expect("an item");
            queue.forget(&item);
            queue.done(&black_box(item));
        }
        began.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    for pairs in [1, 2, 4] {
        let name = if pairs == 1 {
            "1_pair".to_string()
        } else {
            format!("{pairs}_pairs")
        };
        let mut group = c.benchmark_group(format!("add_get_done/{name}"));
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::from_parameter("work_queue"), |b| {
            b.iter_custom(|iters| run_work_queue(pairs, iters))
        });
        group.bench_function(BenchmarkId::from_parameter("crossbeam_channel"), |b| {
            b.iter_custom(|iters| run_channel(pairs, iters))
        });
        group.finish();
    }
    let mut group = c.benchmark_group("retry_round");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::from_parameter("work_queue"), |b| {
        b.iter_custom(run_retry_round)
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
