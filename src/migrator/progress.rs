//! What the migrator has done and is doing: the figures of `/metrics` (under the names of
//! upstream's migrator), the report line and `/debug/migrations`.
//!
//! The collector owns one [`Migrations`] whether or not a migrator runs, so every reader finds
//! it in one place; only the migrator writes it.

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The progress of one migration's pass, counted as it goes, or what the migration waits for
/// before a pass can rewrite.
#[derive(Debug, Default)]
pub struct Progress {
    total: AtomicU64,
    rewritten: AtomicU64,
    skipped: AtomicU64,
    /// Why no pass rewrites now; empty while one does.
    waiting_for: Mutex<String>,
}

impl Progress {
    /// A pass's rewrite of `total` objects begins.
    pub(super) fn start(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
        self.rewritten.store(0, Ordering::Relaxed);
        self.skipped.store(0, Ordering::Relaxed);
        self.waiting_for.lock().clear();
    }

    /// The migration waits for `reason` before it can rewrite (again).
    pub(super) fn wait(&self, reason: &str) {
        reason.clone_into(&mut self.waiting_for.lock());
    }

    /// One object rewritten.
    pub(super) fn rewritten(&self) {
        self.rewritten.fetch_add(1, Ordering::Relaxed);
    }

    /// One object that needed no rewrite (changed or gone since).
    pub(super) fn skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures now.
    pub fn figures(&self) -> Figures {
        let total = self.total.load(Ordering::Relaxed);
        let rewritten = self.rewritten.load(Ordering::Relaxed);
        let skipped = self.skipped.load(Ordering::Relaxed);
        Figures {
            total,
            rewritten,
            skipped,
            remaining: total.saturating_sub(rewritten + skipped),
        }
    }
}

/// One pass's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figures {
    /// Objects the pass found to rewrite.
    pub total: u64,
    /// Rewritten so far.
    pub rewritten: u64,
    /// Skipped so far: changed or gone since the migration began.
    pub skipped: u64,
    /// Still to do.
    pub remaining: u64,
}

/// A migration in progress, as `/debug/migrations` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Active {
    /// The StorageVersionMigration's name.
    pub name: String,
    /// The resource it migrates (`deployments.apps`).
    pub resource: String,
    /// Why it is not rewriting, when it waits; empty while it rewrites.
    pub waiting_for: String,
    /// Its current pass.
    pub figures: Figures,
}

/// Per resource, what every migration of it came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Objects rewritten (`storage_migrator_core_migrator_migrated_objects_total`).
    pub migrated: u64,
    /// Migrations that succeeded.
    pub succeeded: u64,
    /// Migrations that failed.
    pub failed: u64,
}

/// A migration the migrator holds: its resource and its passes' progress.
#[derive(Debug)]
struct Entry {
    resource: String,
    progress: Arc<Progress>,
}

/// The migrator's figures; see the [module docs](self).
#[derive(Debug, Default)]
pub struct Migrations {
    active: Mutex<BTreeMap<String, Entry>>,
    totals: Mutex<BTreeMap<String, Totals>>,
}

impl Migrations {
    /// The progress of the migration `name` of `resource`, registered if it was not.
    pub(super) fn progress(&self, name: &str, resource: &str) -> Arc<Progress> {
        let mut active = self.active.lock();
        let entry = active.entry(name.to_string()).or_insert_with(|| {
            let progress = Arc::new(Progress::default());
            progress.wait("the checks of its first pass");
            Entry {
                resource: resource.to_string(),
                progress,
            }
        });
        entry.progress.clone()
    }

    /// `rewritten` objects of `resource` were rewritten.
    pub(super) fn migrated(&self, resource: &str, rewritten: u64) {
        self.totals.lock().entry(resource.to_string()).or_default().migrated += rewritten;
    }

    /// The migration `name` of `resource` ended, succeeded or not.
    pub(super) fn ended(&self, name: &str, resource: &str, succeeded: bool) {
        self.active.lock().remove(name);
        let mut totals = self.totals.lock();
        let totals = totals.entry(resource.to_string()).or_default();
        if succeeded {
            totals.succeeded += 1;
        } else {
            totals.failed += 1;
        }
    }

    /// Forgets the migration `name`, which ended without this migrator (or was deleted).
    pub(super) fn forget(&self, name: &str) {
        self.active.lock().remove(name);
    }

    /// The migrations in progress, by name.
    pub fn active(&self) -> Vec<Active> {
        self.active
            .lock()
            .iter()
            .map(|(name, e)| Active {
                name: name.clone(),
                resource: e.resource.clone(),
                waiting_for: e.progress.waiting_for.lock().clone(),
                figures: e.progress.figures(),
            })
            .collect()
    }

    /// What every migration came to, by resource.
    pub fn totals(&self) -> BTreeMap<String, Totals> {
        self.totals.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_should_count_what_remains_of_a_pass_and_totals_what_ended() {
        let migrations = Migrations::default();
        let progress = migrations.progress("m", "pods");
        assert_eq!(migrations.active()[0].waiting_for, "the checks of its first pass");
        progress.start(10);
        (0..6).for_each(|_| progress.rewritten());
        progress.skipped();
        let active = migrations.active();
        assert_eq!(active[0].waiting_for, "", "a pass rewrites");
        assert_eq!(active.len(), 1);
        let expected = Figures {
            total: 10,
            rewritten: 6,
            skipped: 1,
            remaining: 3,
        };
        assert_eq!(active[0].figures, expected);
        migrations.migrated("pods", 6);
        migrations.ended("m", "pods", true);
        assert!(migrations.active().is_empty());
        let totals = migrations.totals()["pods"];
        assert_eq!((totals.migrated, totals.succeeded, totals.failed), (6, 1, 0));
    }
}
