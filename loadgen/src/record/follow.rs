//! [`follow`]: one resource's watcher, turned into [`Note`]s for the writer.
//!
//! Invariant: a resource's notes leave in the order its watcher produced them, and a failing
//! resource sends one [`Note::Failing`] per failure streak however often the watcher retries; the
//! streak ends, with a [`Note::Recovered`], at the first event that took a successful call.

use super::convert::to_stream_object;
use super::history::History;
use futures::{Stream, StreamExt};
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta as KubePartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube_gc::api::{PartialObjectMeta, WatchEvent};
use std::pin::pin;
use tokio::sync::mpsc;

/// What the watcher of kube-rs yields for one resource.
pub type WatcherItem = Result<Event<KubePartialObjectMeta<DynamicObject>>, watcher::Error>;

/// What a resource's task tells the writer; each names the resource by its index in the
/// recorded list.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // Nearly every note is an event: boxing it would allocate per event.
pub enum Note {
    /// An event to write.
    Event(usize, WatchEvent),
    /// The resource's first list is complete: from here on it is watched.
    Listed(usize),
    /// A list or watch failed, first of a streak (the error, as text for the log).
    Failing(usize, String),
    /// The resource works again after a streak.
    Recovered(usize),
}

/// The state of one resource's task: its history and where its failure streak stands.
pub struct Follower {
    /// The resource's index in the recorded list, which its notes carry.
    index: usize,
    /// The resource, whose apiVersion and kind every converted object takes.
    resource: ApiResource,
    history: History,
    /// Whether the first list has completed (and [`Note::Listed`] gone out).
    listed: bool,
    /// Whether a failure streak is under way (and its [`Note::Failing`] gone out).
    failing: bool,
}

impl Follower {
    /// A follower for `resource`, the `index`-th recorded.
    pub fn new(index: usize, resource: ApiResource) -> Self {
        Follower {
            index,
            resource,
            history: History::default(),
            listed: false,
            failing: false,
        }
    }

    /// Takes one item of the watcher and appends the notes it implies to `out`.
    pub fn step(&mut self, item: WatcherItem, out: &mut Vec<Note>) {
        let event = match item {
            Ok(event) => event,
            Err(error) => return self.fail(&error, out),
        };
        // `Init` comes before the list call, so it says nothing about the server answering.
        if !matches!(event, Event::Init) && std::mem::take(&mut self.failing) {
            out.push(Note::Recovered(self.index));
        }
        let first_listing_done = matches!(event, Event::InitDone) && !self.listed;
        let index = self.index;
        let event = convert(event, &self.resource);
        self.history.step(event, &mut |e| out.push(Note::Event(index, e)));
        if first_listing_done {
            self.listed = true;
            out.push(Note::Listed(index));
        }
    }

    fn fail(&mut self, error: &watcher::Error, out: &mut Vec<Note>) {
        // 410 Gone: the watch fell behind the server's history and the watcher relists, which
        // is the normal course of a long watch, not a failure.
        if matches!(error, watcher::Error::WatchError(status) if status.code == 410) {
            return;
        }
        if !self.failing {
            self.failing = true;
            out.push(Note::Failing(self.index, super::one_line(error)));
        }
    }
}

/// Feeds `events` through `follower` to `notes` until the stream ends or the writer hangs up.
pub async fn follow(mut follower: Follower, events: impl Stream<Item = WatcherItem>, notes: mpsc::Sender<Note>) {
    let mut events = pin!(events);
    let mut out = Vec::new();
    while let Some(item) = events.next().await {
        follower.step(item, &mut out);
        for note in out.drain(..) {
            if notes.send(note).await.is_err() {
                return;
            }
        }
    }
}

fn convert(event: Event<KubePartialObjectMeta<DynamicObject>>, resource: &ApiResource) -> Event<PartialObjectMeta> {
    let object = |o| to_stream_object(o, resource);
    match event {
        Event::Apply(o) => Event::Apply(object(o)),
        Event::Delete(o) => Event::Delete(object(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(object(o)),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use kube::core::{GroupVersionKind, Status};
    use kube_gc::api::WatchEventType;

    pub fn config_maps() -> ApiResource {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "ConfigMap"), "configmaps")
    }

    pub fn served(uid: &str, resource_version: &str) -> KubePartialObjectMeta<DynamicObject> {
        KubePartialObjectMeta {
            types: None,
            metadata: kube::core::ObjectMeta {
                name: Some(format!("cm-{uid}")),
                uid: Some(uid.into()),
                resource_version: Some(resource_version.into()),
                ..kube::core::ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    pub fn failed(code: u16) -> WatcherItem {
        let status = Status::failure("the server is on fire", "InternalError").with_code(code);
        Err(watcher::Error::WatchError(Box::new(status)))
    }

    /// The notes as short strings, for comparing whole sequences.
    fn describe(notes: &[Note]) -> Vec<String> {
        notes
            .iter()
            .map(|note| match note {
                Note::Event(i, e) => format!("{i} {:?} {}", e.event_type, e.object.metadata.uid),
                Note::Listed(i) => format!("{i} listed"),
                Note::Failing(i, error) => format!("{i} failing: {error}"),
                Note::Recovered(i) => format!("{i} recovered"),
            })
            .collect()
    }

    fn steps(items: Vec<WatcherItem>) -> Vec<String> {
        let mut follower = Follower::new(3, config_maps());
        let mut out = Vec::new();
        for item in items {
            follower.step(item, &mut out);
        }
        describe(&out)
    }

    #[test]
    fn a_failure_streak_should_be_noted_once_and_its_end_once() {
        let notes = steps(vec![
            Ok(Event::Init),
            failed(500),
            Ok(Event::Init),
            failed(500),
            Ok(Event::Init),
            Ok(Event::InitApply(served("a", "1"))),
            Ok(Event::InitDone),
            failed(503),
        ]);
        assert_eq!(
            notes,
            [
                "3 failing: error returned by apiserver during watch: the server is on fire: InternalError",
                "3 recovered",
                "3 Added a",
                "3 listed",
                "3 failing: error returned by apiserver during watch: the server is on fire: InternalError",
            ]
        );
    }

    #[test]
    fn a_410_gone_should_relist_without_being_noted_as_a_failure() {
        let notes = steps(vec![
            Ok(Event::Init),
            Ok(Event::InitApply(served("a", "1"))),
            Ok(Event::InitApply(served("b", "1"))),
            Ok(Event::InitDone),
            failed(410),
            Ok(Event::Init),
            Ok(Event::InitApply(served("b", "2"))),
            Ok(Event::InitDone),
        ]);
        assert_eq!(
            notes,
            ["3 Added a", "3 Added b", "3 listed", "3 Modified b", "3 Deleted a"]
        );
    }

    #[test]
    fn recorded_objects_should_carry_the_resource_type() {
        let mut follower = Follower::new(0, config_maps());
        let mut out = Vec::new();
        follower.step(Ok(Event::Apply(served("a", "1"))), &mut out);
        let [Note::Event(0, event)] = out.as_slice() else {
            panic!("one event: {out:?}")
        };
        assert_eq!(event.event_type, WatchEventType::Added);
        assert_eq!(
            (event.object.api_version.as_str(), event.object.kind.as_str()),
            ("v1", "ConfigMap")
        );
    }
}
