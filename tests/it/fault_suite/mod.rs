//! The fault suite: `kube-gc run` against `kube-gc sim-apiserver` as separate processes on
//! loopback, with faults injected into the collector's requests only, a seeded workload of owner
//! trees deleted with all three policies, and an oracle computed from the workload.
//!
//! Every scenario checks: zero wrongful deletions (the server's audit log names who deleted
//! what), every deletion explained by a line of the collector's journal, no reference to a living owner removed, Foreground order kept, convergence within
//! 120 s of the workload's end, no panic, exit 0 on SIGTERM, and no two replicas writing in turns.
//!
//! `cargo test --release --test it fault_suite -- --ignored --nocapture` runs the whole matrix
//! (`FAULT_SEEDS=1,2,3` and `FAULT_SCENARIOS=a,b` choose; `FAULT_SCALE` sizes the workload),
//! prints its table and writes it to `target/tmp/fault-suite/report.md`; each run's logs and
//! audit logs stay in `target/tmp/fault-suite/<scenario>-<seed>/`, a failed run's in
//! `<scenario>-<seed>-failed/`, which the next run does not clear. The tests that are not
//! ignored are the short seeded subset CI runs.

use crate::support;

mod audit;
mod hostile;
mod oracle;
mod scenario;
mod workload;

use scenario::{Disruption, Row, Scenario, Workload};
use std::time::Duration;

/// The matrix, in the order the report lists it.
fn matrix() -> Vec<Scenario> {
    let s = |name, faults, disruption| Scenario {
        name,
        faults,
        disruption,
        workload: Workload::Trees,
        clock_skews: &[],
        collector_flags: &[],
    };
    vec![
        s("baseline", &[], Disruption::None),
        s("errors-20", &["--error-rate", "*=0.2"], Disruption::None),
        s("throttle-429", &["--error-rate", "*=0.5:429"], Disruption::None),
        s("watch-drops", &["--drop-watch-after", "2s"], Disruption::None),
        // Every watch ends after 50 events, watch-lists included: no watch-list of a larger
        // resource reaches its bookmark, and each read goes on by list.
        s(
            "watch-event-cut",
            &["--drop-watch-after-events", "50"],
            Disruption::None,
        ),
        s(
            "short-history",
            // The drops make the frozen collector reopen its watches, from versions the short
            // history no longer holds: 410, and relists.
            &["--watch-history", "50", "--drop-watch-after", "2s"],
            Disruption::Freeze(Duration::from_secs(10)),
        ),
        s("kill-collector", &[], Disruption::KillCollector),
        s("apiserver-restart", &[], Disruption::RestartServer),
        s("kill-leader", &[], Disruption::KillLeader),
        s("latency", &["--latency", "exp:20ms"], Disruption::None),
        s(
            "timeouts",
            &["--error-rate", "*=0.05:timeout", "--fault-timeout", "2s"],
            Disruption::None,
        ),
        s(
            "combined",
            &[
                "--error-rate",
                "*=0.1",
                "--drop-watch-after",
                "3s",
                "--latency",
                "exp:5ms",
            ],
            Disruption::RestartServer,
        ),
        s(
            "errors-20-apiserver-restart",
            &["--error-rate", "*=0.2"],
            Disruption::RestartServer,
        ),
        // The monitors read by paginated list, so that a list may be in flight when the server
        // restarts: its continue token must not resume a list of the restarted server's.
        Scenario {
            collector_flags: &["--feature-gates", "WatchListClient=false"],
            ..s(
                "list-errors-20-apiserver-restart",
                &["--error-rate", "*=0.2"],
                Disruption::RestartServer,
            )
        },
        s(
            "errors-20-kill-collector",
            &["--error-rate", "*=0.2"],
            Disruption::KillCollector,
        ),
        s("shards-kill", &[], Disruption::KillShard),
        s("shards-add", &[], Disruption::AddShard),
        s(
            "shards-kill-errors-10",
            &["--error-rate", "*=0.1"],
            Disruption::KillShard,
        ),
        // Frozen past its 4 s Lease and the handoff margin: the others take its ranges, and on
        // waking it must give them up, not write on.
        s("shards-freeze", &[], Disruption::FreezeShard(Duration::from_secs(15))),
        s(
            "shards-watch-event-cut",
            &["--drop-watch-after-events", "50"],
            Disruption::KillShard,
        ),
        s(
            "shards-add-old-server",
            &["--feature-gates", "ShardedListAndWatch=false"],
            Disruption::AddShard,
        ),
        // Cut off past its Lease and the handoff margin, as a partition does: its requests never
        // reach the server, and on healing it must claim its ranges again, not write on.
        s("shards-cut-off", &[], Disruption::CutOffShard(Duration::from_secs(15))),
        // Two replicas whose wall clocks are 20 s behind and ahead (more than a Lease duration and
        // the handoff margin), and a third that joins them.
        Scenario {
            clock_skews: &["-20s", "+20s"],
            ..s("shards-add-clock-skew", &[], Disruption::AddShard)
        },
        // Most of the collector's DELETEs throttled, so that the cascades are slow enough for the
        // switch to land in the middle of them.
        Scenario {
            workload: Workload::OrphanSwitch,
            ..s(
                "shards-orphan-switch",
                &["--error-rate", "delete=0.8:429"],
                Disruption::None,
            )
        },
        // 20 000 writes (a dependent deleted and a finalizer removed per owner) within the 120 s
        // bound take more than the default 40 requests a second of three replicas: the budget an
        // operator sizes for such a burst.
        Scenario {
            workload: Workload::ClusterOwners(10_000),
            collector_flags: &["--kube-api-qps", "200", "--kube-api-burst", "400"],
            ..s("shards-10k-foreground", &[], Disruption::None)
        },
        // A tenant churns objects built to hurt the collector (hostile owner uids, names and
        // kinds, references to the victim's roots) while the victim's trees are collected.
        Scenario {
            workload: Workload::HostileTenant,
            collector_flags: &["--kube-api-qps", "200", "--kube-api-burst", "400"],
            ..s("hostile-tenant", &[], Disruption::None)
        },
    ]
}

fn scenario(name: &str) -> Scenario {
    matrix()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn env_list(name: &str) -> Option<Vec<String>> {
    std::env::var(name).ok().map(|v| {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

/// The report's table, in Markdown.
fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | faults | seed | converged in | wrongful | deletions (unexplained) | requests | slowest monitor sync | result |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let converged = r.converged_in.map_or("no".to_string(), |s| format!("{s:.1} s"));
        let result = if r.failures.is_empty() { "pass" } else { "FAIL" };
        out.push_str(&format!(
            "| {} | `{}` | {} | {converged} | {} | {} ({}) | {} | {:.1} s ({}) | {result} |\n",
            r.scenario,
            r.faults,
            r.seed,
            r.wrongful,
            r.explained.0,
            r.explained.1,
            r.requests,
            r.slowest_sync.0,
            r.slowest_sync.1
        ));
    }
    out
}

/// Runs one scenario and fails with every broken rule.
async fn check(name: &str, seed: u64, scale: usize) {
    let row = scenario::run(&scenario(name), seed, scale).await;
    eprintln!("{}", table(std::slice::from_ref(&row)));
    assert!(
        row.failures.is_empty(),
        "{name} (seed {seed}):\n{}",
        row.failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_should_collect_exactly_what_the_oracle_says() {
    check("baseline", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_20_should_delete_nothing_that_should_live() {
    check("errors-20", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_killed_mid_cascade_should_finish_after_its_restart() {
    check("kill-collector", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_killed_mid_cascade_should_have_its_ranges_finished_by_the_others() {
    check("shards-kill", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_joining_mid_cascade_should_take_its_ranges_without_a_wrongful_deletion() {
    check("shards-add", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_frozen_past_its_lease_should_give_its_ranges_up_on_waking() {
    check("shards-freeze", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_ended_after_a_count_of_events_should_still_let_every_view_sync() {
    check("watch-event-cut", 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_tenant_should_neither_grow_the_collector_nor_slow_or_touch_another_tenant() {
    check("hostile-tenant", 1, 2).await;
}

/// The whole matrix, for every seed; see the module docs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the full fault matrix takes tens of minutes; run it with --ignored"]
async fn full_matrix() {
    let seeds: Vec<u64> = env_list("FAULT_SEEDS")
        .unwrap_or_else(|| vec!["1".into()])
        .iter()
        .map(|s| s.parse().expect("FAULT_SEEDS: numbers"))
        .collect();
    let chosen = env_list("FAULT_SCENARIOS");
    let scale: usize = std::env::var("FAULT_SCALE").map_or(3, |s| s.parse().expect("FAULT_SCALE: a number"));
    let mut rows = Vec::new();
    for s in matrix() {
        if chosen.as_ref().is_some_and(|c| !c.iter().any(|n| n == s.name)) {
            continue;
        }
        for &seed in &seeds {
            let row = scenario::run(&s, seed, scale).await;
            eprintln!("{}", table(std::slice::from_ref(&row)));
            for f in &row.failures {
                eprintln!("  {} seed {seed}: {f}", s.name);
            }
            rows.push(row);
        }
    }
    let report = table(&rows);
    println!("{report}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-suite/report.md");
    std::fs::write(&path, &report).expect("write the report");
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.failures.is_empty())
        .map(|r| format!("{} seed {}: {}", r.scenario, r.seed, r.failures.join("; ")))
        .collect();
    assert!(failed.is_empty(), "failed scenarios:\n{}", failed.join("\n"));
}
