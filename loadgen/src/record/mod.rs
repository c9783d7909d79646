//! `loadgen record`: a real cluster's watch events, metadata only, written as a stream that
//! `loadgen replay` reads.
//!
//! Invariant: for each resource, the events written so far are a correct history of it: replayed
//! in order, they rebuild exactly the objects an informer would hold after the same list and
//! watch calls, relists included.
//!
//! # The model
//!
//! 1. [`kube_gc::api::connect`] reads a kubeconfig; [`discover`] picks the resources the garbage collector
//!    would watch (list, watch and delete; preferred version; no Events unless asked for).
//! 2. [`record`] runs one task per resource: kube-rs's watcher over the metadata-only endpoints
//!    gets the objects by watch-list (one WATCH streams them, then goes on with the changes), or
//!    lists them (500 objects a page) and watches from the list's resourceVersion when
//!    `WatchListClient` is off or the server will not do watch-list for that resource; see
//!    [`SyncMode`]. The watcher resumes a dropped watch from the last resourceVersion, relists
//!    after a 410 Gone, and backs off (0.8 s doubling to 30 s) after a failure, so a failing
//!    resource retries alone and never holds up the others.
//! 3. Each task keeps its resource's `History` (UID → last written object) and turns the
//!    watcher's events into watch events: a relist becomes what an informer's replace implies
//!    (new objects ADDED, changed ones MODIFIED, vanished ones DELETED in their last known state,
//!    unchanged ones nothing), and a watched object is ADDED or MODIFIED depending on whether it
//!    was known. BOOKMARKs are the watcher's business and are not written.
//! 4. The tasks send notes through one bounded channel to the writer, which runs in the task that
//!    called [`record`]: events are written as they arrive, a failure is logged once per streak
//!    (a 410 Gone is the normal course of a long watch and is not logged), and a resource's fall
//!    back to lists once, with the server's reason.
//! 5. The writer stops when the caller's `stop` future completes (`--duration` elapsed, or
//!    Ctrl-C), ends the resource tasks and returns a [`RecordSummary`]; the caller finishes the
//!    file.
//!
//! The events of one resource keep their order; across resources the order is arrival order, as
//! the collector's monitors would see it.

mod convert;
mod discover;
mod follow;
mod history;
mod listing;

pub use discover::discover;

use crate::generate::{type_name, Emit};
use crate::stream::StreamError;
use follow::{follow, Follower, Note};
use indicatif::ProgressBar;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta as KubePartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use kube_gc::api::{one_line, Gvr, WatchEventType};
use kube_gc::monitor::SyncMode;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Notes in flight between the resource tasks and the writer. The bound holds memory in check
/// when the disk falls behind; it is several list pages (500 objects each), so a resource's page
/// rarely waits on another's.
const NOTE_CAPACITY: usize = 4096;

/// How often the spinner's counts are refreshed: its own tick, so no refresh goes unseen.
const PROGRESS_PERIOD: Duration = Duration::from_millis(200);

/// An error of kube-rs as one line without repeats: its messages often end with their source's
/// message, which is also their `source()`, and a YAML error adds a multi-line excerpt.
pub fn kube_error(error: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    anyhow::Error::msg(one_line(error))
}

/// Records `resources` (from [`discover`]) into `sink` until `stop` completes, each starting with
/// `listing`, showing counts on `progress`; see the [module docs](self). Fails only when `sink`
/// does; cluster errors are retried and logged.
pub async fn record(
    client: Client,
    resources: &[ApiResource],
    listing: SyncMode,
    sink: &mut impl Emit,
    progress: &ProgressBar,
    stop: impl Future<Output = ()>,
) -> Result<RecordSummary, StreamError> {
    let (notes_tx, notes) = mpsc::channel(NOTE_CAPACITY);
    let mut followers = JoinSet::new();
    for (index, resource) in resources.iter().enumerate() {
        let api = Api::<KubePartialObjectMeta<DynamicObject>>::all_with(client.clone(), resource);
        let open = move |how: SyncMode| watcher(api.clone(), listing::watcher_config(how)).default_backoff();
        let follower = Follower::new(index, resource.clone(), listing);
        followers.spawn(follow(follower, open, notes_tx.clone()));
    }
    drop(notes_tx);
    let summary = write(notes, resources, listing, sink, progress, stop).await;
    followers.shutdown().await;
    summary
}

/// The writer: takes notes until `stop` completes or every resource task has ended.
async fn write(
    mut notes: mpsc::Receiver<Note>,
    resources: &[ApiResource],
    listing: SyncMode,
    sink: &mut impl Emit,
    progress: &ProgressBar,
    stop: impl Future<Output = ()>,
) -> Result<RecordSummary, StreamError> {
    let started = Instant::now();
    let mut tally = Tally::new(resources, listing);
    let mut stop = pin!(stop);
    let mut refresh = tokio::time::interval(PROGRESS_PERIOD);
    loop {
        tokio::select! {
            // Stop first: under a steady flow of notes, Ctrl-C must still end the recording.
            biased;
            () = &mut stop => break,
            note = notes.recv() => match note {
                Some(note) => tally.take(note, sink, progress)?,
                None => break,
            },
            _ = refresh.tick() => progress.set_message(tally.progress()),
        }
    }
    Ok(tally.summary(started.elapsed()))
}

/// The writer's counts.
struct Tally<'a> {
    resources: &'a [ApiResource],
    /// Events written, by resource index.
    events: Vec<u64>,
    /// Whether each resource's first list has completed.
    listed: Vec<bool>,
    /// How each resource's watcher lists now.
    listings: Vec<SyncMode>,
    added: u64,
    modified: u64,
    deleted: u64,
}

impl<'a> Tally<'a> {
    fn new(resources: &'a [ApiResource], listing: SyncMode) -> Self {
        Tally {
            resources,
            events: vec![0; resources.len()],
            listed: vec![false; resources.len()],
            listings: vec![listing; resources.len()],
            added: 0,
            modified: 0,
            deleted: 0,
        }
    }

    fn take(&mut self, note: Note, sink: &mut impl Emit, progress: &ProgressBar) -> Result<(), StreamError> {
        match note {
            Note::Event(index, event) => {
                sink.emit(&event)?;
                self.events[index] += 1;
                match event.event_type {
                    WatchEventType::Added => self.added += 1,
                    WatchEventType::Modified => self.modified += 1,
                    WatchEventType::Deleted => self.deleted += 1,
                    WatchEventType::Bookmark => {}
                }
            }
            Note::Listed(index) => self.listed[index] = true,
            Note::Failing(index, error) => {
                let gvr = gvr(&self.resources[index]);
                progress.suspend(|| eprintln!("loadgen: {gvr}: {error} (retrying with backoff)"));
            }
            Note::Recovered(index) => {
                let gvr = gvr(&self.resources[index]);
                progress.suspend(|| eprintln!("loadgen: {gvr}: working again"));
            }
            Note::FellBack(index, reason) => {
                self.listings[index] = SyncMode::List;
                let gvr = gvr(&self.resources[index]);
                progress.suspend(|| eprintln!("loadgen: {gvr}: no watch-list ({reason}); listing it instead"));
            }
        }
        Ok(())
    }

    fn progress(&self) -> String {
        let written: u64 = self.events.iter().sum();
        let watched = self.listed.iter().filter(|l| **l).count();
        format!(
            "recording: {written} events written, {watched}/{} resources watched",
            self.resources.len()
        )
    }

    /// The resources whose entry in `per_resource` (by resource index) passes `keep`.
    fn resources_where<T>(&self, per_resource: &[T], keep: impl Fn(&T) -> bool) -> Vec<Gvr> {
        let pairs = self.resources.iter().zip(per_resource);
        pairs
            .filter(|(_, value)| keep(value))
            .map(|(resource, _)| gvr(resource))
            .collect()
    }

    fn summary(self, elapsed: Duration) -> RecordSummary {
        let gvrs = self.resources.iter().map(gvr);
        RecordSummary {
            added: self.added,
            modified: self.modified,
            deleted: self.deleted,
            per_resource: gvrs.zip(self.events.iter().copied()).collect(),
            never_listed: self.resources_where(&self.listed, |listed| !listed),
            by_list: self.resources_where(&self.listings, |listing| *listing == SyncMode::List),
            elapsed,
        }
    }
}

fn gvr(resource: &ApiResource) -> Gvr {
    Gvr::new(&resource.group, &resource.version, &resource.plural)
}

/// What a recording wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// ADDED events written.
    pub added: u64,
    /// MODIFIED events written.
    pub modified: u64,
    /// DELETED events written.
    pub deleted: u64,
    /// Events written for each recorded resource.
    pub per_resource: BTreeMap<Gvr, u64>,
    /// Resources whose first list never completed: some or all of their objects are missing.
    pub never_listed: Vec<Gvr>,
    /// Resources recorded by paginated lists rather than watch-list: every one with
    /// `WatchListClient` off, else those that fell back.
    pub by_list: Vec<Gvr>,
    /// From the start of the recording to its stop.
    pub elapsed: Duration,
}

impl RecordSummary {
    /// Events written in all.
    pub fn events(&self) -> u64 {
        self.added + self.modified + self.deleted
    }

    /// Resources recorded by watch-list.
    pub fn by_watch_list(&self) -> usize {
        self.per_resource.len() - self.by_list.len()
    }
}

impl fmt::Display for RecordSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts = [
            (WatchEventType::Added, self.added),
            (WatchEventType::Modified, self.modified),
            (WatchEventType::Deleted, self.deleted),
        ];
        let by_type: Vec<String> = counts.iter().map(|(t, n)| format!("{}={n}", type_name(*t))).collect();
        writeln!(
            f,
            "events: {} ({}) in {:.1} s",
            self.events(),
            by_type.join(" "),
            self.elapsed.as_secs_f64()
        )?;
        write!(
            f,
            "resources: {}, by watch-list: {}, by list: {}",
            self.per_resource.len(),
            self.by_watch_list(),
            self.by_list.len()
        )?;
        if !self.never_listed.is_empty() {
            let names: Vec<String> = self.never_listed.iter().map(Gvr::to_string).collect();
            write!(f, " (never listed: {})", names.join(", "))?;
        }
        for (gvr, events) in &self.per_resource {
            write!(f, "\n  {gvr}: {events}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::follow::tests::{config_maps, failed, refused, scripted, served};
    use super::*;
    use kube::config::Kubeconfig;
    use kube::runtime::watcher::Event;
    use kube_gc::api::WatchEvent;

    fn pods() -> ApiResource {
        ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk("", "v1", "Pod"), "pods")
    }

    /// One resource's scripted watchers, by listing (see [`scripted`]).
    type Scripts = Vec<(SyncMode, Vec<follow::WatcherItem>)>;

    /// Runs one follower per resource, starting by watch-list, over scripted watchers, into the
    /// writer, until the scripts end.
    async fn record_scripted(scripts: Vec<Scripts>) -> (Vec<WatchEvent>, RecordSummary) {
        let resources = [config_maps(), pods()];
        let (notes_tx, notes) = mpsc::channel(NOTE_CAPACITY);
        for (index, scripts) in scripts.into_iter().enumerate() {
            let follower = Follower::new(index, resources[index].clone(), SyncMode::WatchList);
            tokio::spawn(follow(follower, scripted(scripts), notes_tx.clone()));
        }
        drop(notes_tx);
        write_to_vec(notes, &resources, std::future::pending()).await
    }

    /// The writer over `resources`, started by watch-list, into a `Vec` until `stop`.
    async fn write_to_vec(
        notes: mpsc::Receiver<Note>,
        resources: &[ApiResource],
        stop: impl Future<Output = ()>,
    ) -> (Vec<WatchEvent>, RecordSummary) {
        let mut sink = Vec::new();
        let summary = write(
            notes,
            resources,
            SyncMode::WatchList,
            &mut sink,
            &ProgressBar::hidden(),
            stop,
        )
        .await
        .expect("a Vec never fails");
        (sink, summary)
    }

    #[tokio::test]
    async fn every_resource_should_be_written_and_counted_through_the_one_writer() {
        let config_maps = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(served("a", "1"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(served("a", "2"))),
            Ok(Event::Delete(served("a", "3"))),
        ];
        let pods = vec![
            failed(500),
            failed(500),
            Ok(Event::Init),
            Ok(Event::InitApply(served("p", "1"))),
        ];
        let (written, summary) = record_scripted(vec![
            vec![(SyncMode::WatchList, config_maps)],
            vec![(SyncMode::WatchList, pods)],
        ])
        .await;

        let of = |kind: &str| -> Vec<(WatchEventType, String)> {
            let events = written.iter().filter(|e| e.object.kind == kind);
            events.map(|e| (e.event_type, e.object.metadata.uid.clone())).collect()
        };
        use WatchEventType::{Added, Deleted, Modified};
        let a = || "a".to_string();
        assert_eq!(of("ConfigMap"), [(Added, a()), (Modified, a()), (Deleted, a())]);
        assert_eq!(of("Pod"), [(Added, "p".to_string())]);
        assert_eq!((summary.added, summary.modified, summary.deleted), (2, 1, 1));
        let per_resource: Vec<(String, u64)> = summary.per_resource.iter().map(|(g, n)| (g.to_string(), *n)).collect();
        assert_eq!(
            per_resource,
            [("v1/configmaps".to_string(), 3), ("v1/pods".to_string(), 1)]
        );
        // The pods' list never reached InitDone.
        assert_eq!(summary.never_listed, [Gvr::new("", "v1", "pods")]);
        assert_eq!((summary.by_watch_list(), summary.by_list.len()), (2, 0));
    }

    #[tokio::test]
    async fn a_resource_that_fell_back_should_be_written_as_before_and_counted_by_list() {
        let listing = || {
            vec![
                Ok(Event::Init),
                Ok(Event::InitApply(served("a", "1"))),
                Ok(Event::InitDone),
            ]
        };
        let (written, summary) = record_scripted(vec![
            vec![(SyncMode::WatchList, vec![refused()]), (SyncMode::List, listing())],
            vec![(SyncMode::WatchList, listing())],
        ])
        .await;
        let kinds: Vec<&str> = written.iter().map(|e| e.object.kind.as_str()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "ConfigMap").count(), 1, "{kinds:?}");
        assert_eq!(kinds.iter().filter(|k| **k == "Pod").count(), 1, "{kinds:?}");
        assert_eq!(summary.by_list, [Gvr::new("", "v1", "configmaps")]);
        assert_eq!(summary.by_watch_list(), 1);
        assert!(summary.never_listed.is_empty());
    }

    #[tokio::test]
    async fn the_writer_should_stop_when_told_even_with_notes_waiting() {
        let (notes_tx, notes) = mpsc::channel(NOTE_CAPACITY);
        let event = WatchEvent {
            event_type: WatchEventType::Added,
            object: std::sync::Arc::default(),
        };
        notes_tx.send(Note::Event(0, event)).await.expect("open");
        let (sink, summary) = write_to_vec(notes, &[config_maps()], async {}).await;
        assert!(sink.is_empty());
        assert_eq!(summary.events(), 0);
        assert_eq!(summary.never_listed, [Gvr::new("", "v1", "configmaps")]);
    }

    #[test]
    fn a_kube_error_should_read_as_one_line_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = kube::config::KubeconfigError::ReadConfig(io, "/x".into());
        assert_eq!(
            one_line(&error),
            r#"failed to read kubeconfig from '"/x"': No such file or directory"#
        );
        let yaml = Kubeconfig::from_yaml("not: [yaml").expect_err("bad YAML");
        let line = one_line(&yaml);
        assert!(line.starts_with("failed to parse kubeconfig YAML: "), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn the_summary_should_show_counts_by_type_and_resource() {
        let summary = RecordSummary {
            added: 5,
            modified: 2,
            deleted: 1,
            per_resource: BTreeMap::from([
                (Gvr::new("", "v1", "pods"), 6),
                (Gvr::new("apps", "v1", "replicasets"), 2),
            ]),
            never_listed: vec![Gvr::new("apps", "v1", "replicasets")],
            by_list: vec![Gvr::new("", "v1", "pods")],
            elapsed: Duration::from_millis(30_040),
        };
        assert_eq!(
            summary.to_string(),
            "events: 8 (ADDED=5 MODIFIED=2 DELETED=1) in 30.0 s\n\
             resources: 2, by watch-list: 1, by list: 1 (never listed: apps/v1/replicasets)\n  \
             v1/pods: 6\n  apps/v1/replicasets: 2"
        );
    }
}
