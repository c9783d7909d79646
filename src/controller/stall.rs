//! Stall detection: the collector is reported stalled only while work waits on it, none of that
//! work has completed for `stall_after`, and the API server answers its requests.
//!
//! `/healthz` keeps meaning "the process serves"; a stall is reported beside it, in the
//! `kube_gc_stalled` gauge, one `warn` log line when it starts and one when it ends, and
//! `kube-gc run`'s periodic report.
//!
//! # Definitions
//!
//! - **Work waiting**: an item in attemptToDelete or attemptToOrphan (queued, held by a worker, or
//!   delayed for a retry), or an object in the graph being deleted with the `foregroundDeletion`
//!   or `orphan` finalizer ([`waits_on_collector`]), which only the collector removes.
//! - **Completion**: a work item that ended in success ([`WorkQueue::forget`](crate::queue::WorkQueue::forget)), or a PATCH or
//!   DELETE the API server accepted (counted as 200 by the API's call counts). Reads, Events and
//!   failed writes are not completions.
//! - **API trouble**: the requests sent since the last reading all failed with 429, a 5xx or no
//!   answer at all (which the counts file under a 5xx), and none got another answer. It lasts
//!   until a request gets an answer again, a success or another 4xx. A reading during which no
//!   request was sent leaves it as it was: a client waiting out an outage's backoff sends nothing.
//!
//! The quiet clock restarts at every reading that sees a completion, no work waiting, or API
//! trouble; the collector is stalled once the clock reaches `stall_after`. A stall during an
//! outage is therefore reported as the outage (the API error metrics), never as a stall, and the
//! stall clock starts from zero once the server answers again. A busy collector that completes
//! other work while one owner stays blocked is not stalled either: that owner shows in
//! `/debug/stuck` and in `kube_gc_queue_oldest_item_age_seconds`.
//!
//! # Model
//!
//! One task of the collector takes a [`Reading`] every [`tick`] of tokio's clock (so a paused
//! test clock drives it) and passes it to [`Detector::step`], the one step function, which is
//! pure: readings in, [`Change`]s out. The same task keeps, for each object waiting on the
//! collector, when it first saw it waiting: the graph keeps no deletionTimestamp, and the
//! collector's monotonic clock needs no agreement with the API server's. Readers (`/metrics`,
//! `/debug/stuck`, the report line) take the [`Stall`]'s lock for a copy; what they see is as old
//! as the last tick.

use crate::api::CallCount;
use crate::graph::{Node, Uid};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// True when `node` is being deleted with a finalizer only the collector removes:
/// `foregroundDeletion` (it waits for its blocking dependents) or `orphan` (it waits for its
/// dependents to be orphaned).
pub fn waits_on_collector(node: &Node) -> bool {
    let seen = node.observation();
    !node.is_virtual() && seen.being_deleted && (seen.finalizers.foreground || seen.finalizers.orphan)
}

/// How often the detector reads the collector: a tenth of `stall_after`, between 1 and 30 s, so
/// a stall is reported at most 10 % late (30 s at the default 10 min) and a scan of a large graph
/// runs at most twice a minute.
pub fn tick(stall_after: Duration) -> Duration {
    (stall_after / 10).clamp(Duration::from_secs(1), Duration::from_secs(30))
}

/// What the detector reads at each tick. The counters only grow; the detector looks at how they
/// moved since the last reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Items in the two work queues: queued, held or delayed.
    pub items: usize,
    /// Objects being deleted with a finalizer only the collector removes.
    pub objects: usize,
    /// Items forgotten plus PATCHes and DELETEs accepted, so far.
    pub completed: u64,
    /// Requests answered by the server (a success or a 4xx other than 429), so far.
    pub answered: u64,
    /// Requests that failed with 429, a 5xx or no answer, so far.
    pub troubled: u64,
}

impl Reading {
    /// Fills `completed` (with `forgotten` work items), `answered` and `troubled` from the API's
    /// call counts.
    pub fn with_calls(mut self, forgotten: u64, calls: &[CallCount]) -> Reading {
        self.completed = forgotten;
        for call in calls {
            let trouble = call.code == 429 || call.code >= 500;
            if trouble {
                self.troubled += call.count;
            } else {
                self.answered += call.count;
            }
            if call.code == 200 && matches!(call.verb, "patch" | "delete") {
                self.completed += call.count;
            }
        }
        self
    }
}

/// Why a stall ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calm {
    /// Work completed.
    Completed,
    /// No work waits any more.
    NoWork,
    /// The API server stopped answering: reported as the outage, not as a stall.
    ApiTrouble,
}

impl std::fmt::Display for Calm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Calm::Completed => "work completed",
            Calm::NoWork => "no work waits",
            Calm::ApiTrouble => "the API server is not answering (an outage, not a stall)",
        })
    }
}

/// A change of the stall state, to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Work has waited with nothing completed, while the API server answered.
    Started {
        /// For how long.
        quiet: Duration,
    },
    /// The stall is over.
    Ended(Calm),
}

/// The stall state machine; see the [module docs](self).
#[derive(Debug)]
pub struct Detector {
    stall_after: Duration,
    /// The previous reading; `None` before the first, whose counters are only a baseline.
    last: Option<Reading>,
    /// The last reading that saw a completion, no work or API trouble (the start, before any).
    quiet_since: Instant,
    /// Whether the API server is in trouble, as the last reading with requests said.
    api_trouble: bool,
    stalled: bool,
}

impl Detector {
    /// A detector that starts its quiet clock at `now`.
    pub fn new(stall_after: Duration, now: Instant) -> Detector {
        Detector {
            stall_after,
            last: None,
            quiet_since: now,
            api_trouble: false,
            stalled: false,
        }
    }

    /// Takes the reading made at `now`; returns the change of state it brings, if any.
    pub fn step(&mut self, now: Instant, reading: Reading) -> Option<Change> {
        let moved = |field: fn(&Reading) -> u64| self.last.is_some_and(|last| field(&reading) > field(&last));
        let (completed, answered, troubled) = (moved(|r| r.completed), moved(|r| r.answered), moved(|r| r.troubled));
        if answered {
            self.api_trouble = false;
        } else if troubled {
            self.api_trouble = true;
        }
        self.last = Some(reading);
        let calm = if completed {
            Some(Calm::Completed)
        } else if reading.items == 0 && reading.objects == 0 {
            Some(Calm::NoWork)
        } else if self.api_trouble {
            Some(Calm::ApiTrouble)
        } else {
            None
        };
        if let Some(calm) = calm {
            self.quiet_since = now;
            return std::mem::take(&mut self.stalled).then_some(Change::Ended(calm));
        }
        let quiet = now.saturating_duration_since(self.quiet_since);
        if !self.stalled && quiet >= self.stall_after {
            self.stalled = true;
            return Some(Change::Started { quiet });
        }
        None
    }
}

/// The stall state as readers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallStatus {
    /// Stalled, as defined in the [module docs](self).
    pub stalled: bool,
    /// Time since the quiet clock last restarted (a completion, no work, or API trouble).
    pub quiet_for: Duration,
    /// Work items waiting at the last reading.
    pub items: usize,
    /// Objects waiting on the collector at the last reading.
    pub objects: usize,
    /// Whether the API server was in trouble at the last reading.
    pub api_trouble: bool,
}

impl std::fmt::Display for StallStatus {
    /// A clause for a log line: empty when nothing is worth saying.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stalled {
            write!(
                f,
                "; STALLED: nothing completed for {}s while {} item(s) and {} object(s) being deleted wait (see /debug/stuck)",
                self.quiet_for.as_secs(),
                self.items,
                self.objects
            )
        } else if self.api_trouble {
            f.write_str("; API server not answering")
        } else {
            Ok(())
        }
    }
}

/// The detector and what it remembers, shared by its task and the readers.
#[derive(Debug)]
pub struct Stall {
    stall_after: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    detector: Detector,
    last: Reading,
    /// Each object waiting on the collector at the last reading, and when a reading first saw it
    /// waiting.
    waiting_since: HashMap<Uid, Instant>,
}

impl Stall {
    /// A detector for `stall_after`, its clock starting now.
    pub fn new(stall_after: Duration) -> Stall {
        Stall {
            stall_after,
            inner: Mutex::new(Inner {
                detector: Detector::new(stall_after, Instant::now()),
                last: Reading::default(),
                waiting_since: HashMap::new(),
            }),
        }
    }

    /// How long work may wait with nothing completed before it counts as a stall.
    pub fn stall_after(&self) -> Duration {
        self.stall_after
    }

    /// The detector's task only: records `reading`, taken at `now`, with the UIDs of the objects
    /// waiting on the collector; returns the change it brings.
    pub fn record(&self, now: Instant, reading: Reading, waiting: &[Uid]) -> Option<Change> {
        let mut inner = self.inner.lock();
        let before = std::mem::take(&mut inner.waiting_since);
        inner.waiting_since = waiting
            .iter()
            .map(|uid| (uid.clone(), before.get(uid).copied().unwrap_or(now)))
            .collect();
        inner.last = reading;
        inner.detector.step(now, reading)
    }

    /// The state as of the last reading, with the quiet time up to now.
    pub fn status(&self) -> StallStatus {
        let inner = self.inner.lock();
        StallStatus {
            stalled: inner.detector.stalled,
            quiet_for: Instant::now().saturating_duration_since(inner.detector.quiet_since),
            items: inner.last.items,
            objects: inner.last.objects,
            api_trouble: inner.detector.api_trouble,
        }
    }

    /// The objects waiting on the collector at the last reading, with when a reading first saw
    /// each waiting.
    pub fn waiting_objects(&self) -> Vec<(Uid, Instant)> {
        let inner = self.inner.lock();
        inner
            .waiting_since
            .iter()
            .map(|(uid, since)| (uid.clone(), *since))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALL_AFTER: Duration = Duration::from_secs(600);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// Work waiting, with the counters given.
    fn busy(completed: u64, answered: u64, troubled: u64) -> Reading {
        Reading {
            items: 1,
            objects: 1,
            completed,
            answered,
            troubled,
        }
    }

    /// Steps `detector` through `readings`, one a minute from `start`; the changes, by minute.
    fn run(detector: &mut Detector, start: Instant, readings: &[Reading]) -> Vec<(u64, Change)> {
        (0u64..)
            .zip(readings)
            .filter_map(|(minute, r)| Some((minute, detector.step(start + secs(60 * minute), *r)?)))
            .collect()
    }

    #[test]
    fn detector_should_report_a_stall_once_after_stall_after_without_completion_then_its_end() {
        let start = Instant::now();
        let mut detector = Detector::new(STALL_AFTER, start);
        let mut readings = vec![busy(5, 100, 0); 12];
        readings.push(busy(6, 101, 0));
        let changes = run(&mut detector, start, &readings);
        assert_eq!(
            changes,
            [
                (10, Change::Started { quiet: secs(600) }),
                (12, Change::Ended(Calm::Completed))
            ]
        );
    }

    #[test]
    fn detector_should_not_report_a_stall_while_work_completes_or_none_waits() {
        let start = Instant::now();
        let mut detector = Detector::new(STALL_AFTER, start);
        let completing: Vec<Reading> = (0..30).map(|n| busy(n / 5, 100, 0)).collect();
        assert_eq!(
            run(&mut detector, start, &completing),
            [],
            "a completion every 5 minutes"
        );
        let idle = vec![Reading::default(); 30];
        assert_eq!(run(&mut detector, start, &idle), [], "nothing waits");
    }

    #[test]
    fn detector_should_report_an_outage_as_the_end_of_a_stall_and_not_as_a_stall() {
        let start = Instant::now();
        let mut detector = Detector::new(STALL_AFTER, start);
        let mut readings = vec![busy(0, 10, 0); 11];
        // The server stops answering: failures, then silence while clients back off.
        readings.push(busy(0, 10, 5));
        readings.extend(vec![busy(0, 10, 5); 20]);
        // It answers again, but nothing completes: a stall only 10 minutes later.
        readings.extend(vec![busy(0, 11, 5); 11]);
        let changes = run(&mut detector, start, &readings);
        assert_eq!(
            changes,
            [
                (10, Change::Started { quiet: secs(600) }),
                (11, Change::Ended(Calm::ApiTrouble)),
                (41, Change::Started { quiet: secs(600) }),
            ]
        );
    }

    #[test]
    fn a_reading_should_count_accepted_writes_as_completions_and_429_and_5xx_as_trouble() {
        let call = |verb, code, count| CallCount { verb, code, count };
        let calls = [
            call("delete", 200, 3),
            call("patch", 200, 2),
            call("get", 200, 7),
            call("delete", 404, 1),
            call("patch", 409, 1),
            call("delete", 503, 4),
            call("list", 429, 2),
            call("create", 200, 9),
        ];
        let reading = Reading::default().with_calls(10, &calls);
        assert_eq!((reading.completed, reading.answered, reading.troubled), (15, 23, 6));
    }

    #[tokio::test(start_paused = true)]
    async fn stall_should_remember_when_each_waiting_object_was_first_seen() {
        let stall = Stall::new(STALL_AFTER);
        let (a, b) = (Uid::parse("a"), Uid::parse("b"));
        let t0 = Instant::now();
        stall.record(t0, busy(0, 0, 0), std::slice::from_ref(&a));
        stall.record(t0 + secs(30), busy(0, 0, 0), &[a, b.clone()]);
        stall.record(t0 + secs(60), busy(0, 0, 0), std::slice::from_ref(&b));
        let mut waiting = stall.waiting_objects();
        waiting.sort();
        assert_eq!(waiting, [(b, t0 + secs(30))], "a left; b kept its first sighting");
    }
}
