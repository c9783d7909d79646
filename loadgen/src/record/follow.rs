//! [`follow`]: one resource's watcher, turned into [`Note`]s for the writer.
//!
//! Invariant: a resource's notes leave in the order its watcher produced them, and a failing
//! resource sends one [`Note::Failing`] per failure streak however often the watcher retries; the
//! streak ends, with a [`Note::Recovered`], at the first event that took a successful call.
//!
//! A resource that gives up watch-list ([`super::listing`]) sends one [`Note::FellBack`], instead
//! of a failure, and its task carries on with a new watcher that lists. The history stays: the new
//! watcher's listing is diffed against what was written, as any relist is, so the recording stays
//! a correct history across the switch.

use super::convert::to_stream_object;
use super::history::History;
use super::listing;
use futures::{Stream, StreamExt};
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta as KubePartialObjectMeta;
use kube::discovery::ApiResource;
use kube::runtime::watcher::{self, Event};
use kube_gc::api::{PartialObjectMeta, WatchEvent};
use kube_gc::monitor::{SyncMode, INITIAL_EVENTS_END_WAIT};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::error::Elapsed;

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
    /// The resource gave up watch-list for good, for this reason (as text for the log).
    FellBack(usize, String),
}

/// The state of one resource's task: its history, its listing, and where its failure streak and
/// its watch-list stand.
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
    /// How the watcher lists; changes only from watch-list to lists, before `listed`.
    listing: SyncMode,
    /// Whether a listing's objects are arriving: the last item was its `Init` or an `InitApply`.
    initial_events: bool,
}

impl Follower {
    /// A follower for `resource`, the `index`-th recorded, whose watcher starts with `listing`.
    pub fn new(index: usize, resource: ApiResource, listing: SyncMode) -> Self {
        Follower {
            index,
            resource,
            history: History::default(),
            listed: false,
            failing: false,
            listing,
            initial_events: false,
        }
    }

    /// How the watcher lists now.
    pub fn listing(&self) -> SyncMode {
        self.listing
    }

    /// How long the watcher may stay silent before [`Follower::silent`]: bounded only while a
    /// watch-list that may still fall back streams its initial events.
    pub fn silence_bound(&self) -> Option<Duration> {
        (self.may_fall_back() && self.initial_events).then_some(INITIAL_EVENTS_END_WAIT)
    }

    /// The watcher stayed silent for the [`Follower::silence_bound`]: no initial-events-end
    /// bookmark is coming.
    pub fn silent(&mut self, out: &mut Vec<Note>) {
        let reason = format!(
            "no initial-events-end bookmark after {} s without an event",
            INITIAL_EVENTS_END_WAIT.as_secs()
        );
        self.fall_back(reason, out);
    }

    /// Takes one item of the watcher and appends the notes it implies to `out`.
    pub fn step(&mut self, item: WatcherItem, out: &mut Vec<Note>) {
        let event = match item {
            Ok(event) => event,
            Err(error) => return self.fail(&error, out),
        };
        self.initial_events = matches!(event, Event::Init | Event::InitApply(_));
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
        // The watcher backs off after an error: that wait is not the stream's silence.
        self.initial_events = false;
        if let Some(reason) = listing::refusal(error).filter(|_| self.may_fall_back()) {
            return self.fall_back(format!("the server answered {reason}"), out);
        }
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

    /// Whether the resource may still give up watch-list; see [`super::listing`].
    fn may_fall_back(&self) -> bool {
        self.listing == SyncMode::WatchList && !self.listed
    }

    fn fall_back(&mut self, reason: String, out: &mut Vec<Note>) {
        self.listing = SyncMode::List;
        self.initial_events = false;
        out.push(Note::FellBack(self.index, reason));
    }
}

/// Feeds the items of the watcher that `open` makes for the follower's listing through `follower`
/// to `notes`, until the watcher ends or the writer hangs up; opens a new watcher when the
/// follower falls back to lists.
pub async fn follow<S>(mut follower: Follower, mut open: impl FnMut(SyncMode) -> S, notes: mpsc::Sender<Note>)
where
    S: Stream<Item = WatcherItem>,
{
    let mut events = Box::pin(open(follower.listing()));
    let mut out = Vec::new();
    loop {
        let listing = follower.listing();
        match next_within(&mut events, follower.silence_bound()).await {
            Ok(Some(item)) => follower.step(item, &mut out),
            Ok(None) => return,
            Err(_) => follower.silent(&mut out),
        }
        if follower.listing() != listing {
            events = Box::pin(open(follower.listing()));
        }
        for note in out.drain(..) {
            if notes.send(note).await.is_err() {
                return;
            }
        }
    }
}

/// The next item of `events`, or `Elapsed` when `bound` passes first.
async fn next_within<S: Stream + Unpin>(events: &mut S, bound: Option<Duration>) -> Result<Option<S::Item>, Elapsed> {
    match bound {
        Some(bound) => tokio::time::timeout(bound, events.next()).await,
        None => Ok(events.next().await),
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
    use super::super::listing::tests::refused_start;
    use super::*;
    use futures::stream::{self, BoxStream};
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

    /// A watch-list that the server refuses with 422, as with its `WatchList` gate off.
    pub fn refused() -> WatcherItem {
        Err(refused_start(422, "Invalid"))
    }

    /// A watcher opener that plays each script once, in order, to the watcher of its listing; a
    /// watcher without a script left ends at once.
    pub fn scripted(
        mut scripts: Vec<(SyncMode, Vec<WatcherItem>)>,
    ) -> impl FnMut(SyncMode) -> BoxStream<'static, WatcherItem> + Send + 'static {
        move |listing| match scripts.iter().position(|(l, _)| *l == listing) {
            Some(at) => stream::iter(scripts.remove(at).1).boxed(),
            None => stream::empty().boxed(),
        }
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
                Note::FellBack(i, reason) => format!("{i} fell back: {reason}"),
            })
            .collect()
    }

    /// The notes of `items` for a follower that starts with `listing`.
    fn steps_from(listing: SyncMode, items: Vec<WatcherItem>) -> Vec<String> {
        let mut follower = Follower::new(3, config_maps(), listing);
        let mut out = Vec::new();
        for item in items {
            follower.step(item, &mut out);
        }
        describe(&out)
    }

    fn steps(items: Vec<WatcherItem>) -> Vec<String> {
        steps_from(SyncMode::WatchList, items)
    }

    /// Runs `follow` over `open` until the watcher ends; the notes and the listings opened.
    async fn follow_all<S>(mut open: impl FnMut(SyncMode) -> S + Send + 'static) -> (Vec<String>, Vec<SyncMode>)
    where
        S: Stream<Item = WatcherItem> + Send + 'static,
    {
        let opened = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = std::sync::Arc::clone(&opened);
        let open = move |listing| {
            log.lock().expect("not poisoned").push(listing);
            open(listing)
        };
        let (notes_tx, mut notes) = mpsc::channel(16);
        tokio::spawn(follow(
            Follower::new(3, config_maps(), SyncMode::WatchList),
            open,
            notes_tx,
        ));
        let mut received = Vec::new();
        while let Some(note) = notes.recv().await {
            received.push(note);
        }
        let opened = opened.lock().expect("not poisoned").clone();
        (describe(&received), opened)
    }

    const REFUSAL: &str = "3 fell back: the server answered 422 Invalid: sendInitialEvents is forbidden";

    #[test]
    fn a_refused_watch_list_should_fall_back_once() {
        let notes = steps(vec![
            refused(),
            Ok(Event::Init),
            Ok(Event::InitApply(served("a", "1"))),
            Ok(Event::InitDone),
        ]);
        assert_eq!(notes, [REFUSAL, "3 Added a", "3 listed"]);
    }

    #[test]
    fn a_refusal_once_fallen_back_listed_or_listing_should_be_a_failure() {
        let short = |notes: Vec<String>| -> Vec<String> {
            let failing = "3 failing: failed to start watching object: ApiError: sendInitialEvents is forbidden";
            let short = |note: String| {
                if note.starts_with(failing) {
                    "3 failing".into()
                } else {
                    note
                }
            };
            notes.into_iter().map(short).collect()
        };
        assert_eq!(short(steps(vec![refused(), refused()])), [REFUSAL, "3 failing"]);
        let listed_first = steps(vec![Ok(Event::Init), Ok(Event::InitDone), refused()]);
        assert_eq!(short(listed_first), ["3 listed", "3 failing"]);
        let listing = steps_from(SyncMode::List, vec![refused()]);
        assert_eq!(short(listing), ["3 failing"]);
    }

    #[test]
    fn silence_should_be_bounded_only_while_a_watch_list_streams_its_first_listing() {
        let bounds = |listing: SyncMode, items: Vec<WatcherItem>| -> Vec<bool> {
            let mut follower = Follower::new(0, config_maps(), listing);
            let mut out = Vec::new();
            let mut bounded = vec![follower.silence_bound().is_some()];
            for item in items {
                follower.step(item, &mut out);
                bounded.push(follower.silence_bound() == Some(INITIAL_EVENTS_END_WAIT));
            }
            bounded
        };
        let script = || {
            vec![
                Ok(Event::Init),
                Ok(Event::InitApply(served("a", "1"))),
                failed(500),
                Ok(Event::InitApply(served("b", "1"))),
                Ok(Event::InitDone),
                Ok(Event::Apply(served("b", "2"))),
                // A relist once watch-list has worked.
                Ok(Event::Init),
            ]
        };
        assert_eq!(
            bounds(SyncMode::WatchList, script()),
            [false, true, true, false, true, false, false, false]
        );
        assert_eq!(bounds(SyncMode::List, script()), [false; 8]);
    }

    #[tokio::test]
    async fn a_refused_watch_list_should_be_followed_by_a_listing_watcher_keeping_the_history() {
        let open = scripted(vec![
            (
                SyncMode::WatchList,
                vec![Ok(Event::Init), Ok(Event::InitApply(served("a", "1"))), refused()],
            ),
            (
                SyncMode::List,
                vec![
                    Ok(Event::Init),
                    Ok(Event::InitApply(served("b", "1"))),
                    Ok(Event::InitDone),
                ],
            ),
        ]);
        let (notes, opened) = follow_all(open).await;
        // The half-streamed `a` is gone from the listing: it was deleted meanwhile.
        assert_eq!(notes, ["3 Added a", REFUSAL, "3 Added b", "3 Deleted a", "3 listed"]);
        assert_eq!(opened, [SyncMode::WatchList, SyncMode::List]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_list_silent_before_its_end_bookmark_should_fall_back_after_the_bound() {
        let started = tokio::time::Instant::now();
        let open = |listing| match listing {
            // The objects, then nothing: no initial-events-end bookmark.
            SyncMode::WatchList => stream::iter(vec![Ok(Event::Init), Ok(Event::InitApply(served("a", "1")))])
                .chain(stream::pending())
                .boxed(),
            SyncMode::List => stream::iter(vec![
                Ok(Event::Init),
                Ok(Event::InitApply(served("a", "1"))),
                Ok(Event::InitDone),
            ])
            .boxed(),
        };
        let (notes, opened) = follow_all(open).await;
        assert_eq!(
            notes,
            [
                "3 Added a",
                "3 fell back: no initial-events-end bookmark after 30 s without an event",
                "3 listed"
            ]
        );
        assert_eq!(opened, [SyncMode::WatchList, SyncMode::List]);
        assert_eq!(started.elapsed(), INITIAL_EVENTS_END_WAIT);
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
        let mut follower = Follower::new(0, config_maps(), SyncMode::WatchList);
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
