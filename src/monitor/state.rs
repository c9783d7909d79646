//! The monitor as a state machine, in the shape of kube-runtime's `watcher`: one [`State`] and
//! one transition, [`State::step`], which takes what the driver observed ([`Input`]) and returns
//! the next state and what the driver must do ([`Action`]). The [driver](super::driver) only
//! performs actions against the API, the router, the graph and the clock, and feeds what they
//! answer back as inputs.
//!
//! Invariants:
//!
//! - The step is pure and synchronous: no request, no clock, no channel. Time reaches it as
//!   inputs (how long a watch stayed open, how long a watch-list's initial events took).
//! - Of one step's actions, at most one asks for something: a request, the backoff, or the pace
//!   of the initial events; it comes last, and its answer is the next input. Without one, the
//!   next input is the open stream's next event.
//! - A read of the whole resource begins with [`Action::ReadStarted`], routes objects as they
//!   arrive, and routes the deletes of the objects it did not show ([`Action::RouteVanished`])
//!   only once it has shown all of them: at a list's last page or at a watch-list's
//!   initial-events-end bookmark, right before [`Action::ReadCompleted`]. A read that must start
//!   over ([`Action::ReadRestarted`]) makes every object it routed unseen again.
//! - A failed request is asked again after [`Action::BackOff`] from where it was: a page from its
//!   own continue token, a watch from the last resourceVersion seen, bookmarks included. Only a
//!   410 goes back further: to the list's first page, or, for a watch, to a new read.
//! - Progress ([`Action::Progress`]) comes before anything else the step does: a page, a
//!   watch-list's first object, a watch that delivered an event, stayed open or ended with 410.
//! - Once the server refused a watch-list, every read is by list: no state whose `mode` is
//!   [`SyncMode::List`] leads to a watch-list.

use super::list::of_snapshot;
use super::watch_list::{self, Refused};
use super::{SyncMode, ROOM_CHECK_EVERY, SHORT_WATCH};
use crate::api::{ApiError, ObjectList, PartialObjectMeta, WatchEvent};
use crate::event::EventType;
use std::sync::Arc;
use std::time::Duration;

/// Where a monitor is.
#[derive(Debug, PartialEq)]
pub(super) enum State {
    /// A request is out; its answer is the next input.
    Asking(Request),
    /// Waiting out the backoff before asking again.
    BackingOff(Request),
    /// Routing a watch-list's initial events, `routed` objects of them so far.
    InitialEvents { routed: u64 },
    /// An initial event due a pace check ([`Action::MeasurePace`]), routed if the pace holds.
    Pacing {
        routed: u64,
        event_type: EventType,
        object: Arc<PartialObjectMeta>,
    },
    /// Following a watch that has delivered `events` so far; `resource_version` is the last seen.
    Watching {
        resource_version: String,
        events: u64,
        mode: SyncMode,
    },
}

/// What a monitor asks the server for. `mode` is how it reads the resource the next time: a
/// refusal of watch-list made it [`SyncMode::List`] for good.
#[derive(Debug, PartialEq)]
pub(super) enum Request {
    /// A watch-list: the start of a read by watch-list.
    WatchList,
    /// The page `continue_token` asks for (`""`: the first) of the list whose first page came at
    /// `list_version`.
    Page {
        continue_token: String,
        list_version: Option<String>,
        mode: SyncMode,
    },
    /// A watch from `resource_version`.
    Watch { resource_version: String, mode: SyncMode },
}

/// What the driver observed.
// Most inputs are events, moved once into the step: boxing them would cost an allocation per
// event to save a copy of a few hundred bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Input {
    /// The watch-list or the watch asked for is open.
    Opened,
    /// The request failed, or the open stream ended with this error.
    Failed(ApiError),
    /// The page asked for.
    Page(ObjectList),
    /// The open stream's next event.
    Event(WatchEvent),
    /// The server closed the stream, `open_for` after the watch was asked for.
    Closed { open_for: Duration },
    /// A watch-list's stream was silent for [`watch_list::INITIAL_EVENTS_END_WAIT`] before its
    /// bookmark.
    Silent,
    /// How long a watch-list's initial events took so far, less the waits for room.
    Paced(Duration),
    /// The backoff was waited out.
    BackoffElapsed,
}

/// What the driver must do.
#[derive(Debug, PartialEq)]
pub(super) enum Action {
    /// Ask for a watch-list ([`Input::Opened`] or [`Input::Failed`]).
    OpenWatchList,
    /// Ask for a list page ([`Input::Page`] or [`Input::Failed`]).
    ListPage { continue_token: String },
    /// Open a watch ([`Input::Opened`] or [`Input::Failed`]).
    Watch { resource_version: String },
    /// Wait the backoff ([`Input::BackoffElapsed`]).
    BackOff,
    /// Measure the initial events' pace ([`Input::Paced`]).
    MeasurePace,
    /// The watch-list's stream goes on as the watch: time it as one from now.
    ContinueAsWatch,
    /// Drop the open stream.
    CloseStream,
    /// Wait for room in the router.
    AwaitRoom,
    /// Route each object of a page as [`Action::RouteListed`] does.
    RoutePage(Vec<PartialObjectMeta>),
    /// Route an object the read shows: an update if the monitor knew it, an add if not.
    RouteListed(Arc<PartialObjectMeta>),
    /// Route the delete of an object the read shows deleted; none follows at the read's end.
    RouteDeleteInRead(Arc<PartialObjectMeta>),
    /// Route a watch event as the server sent it.
    Route(EventType, Arc<PartialObjectMeta>),
    /// Once the builders caught up, route a delete for every object the read did not show.
    RouteVanished,
    /// A read of the whole resource begins: every known object is unseen until it shows it.
    ReadStarted,
    /// The read starts over: every object it routed is unseen again.
    ReadRestarted,
    /// The read ended: the view is synced.
    ReadCompleted,
    /// A request made progress: reset the backoff, log a recovery.
    Progress,
    /// A request failed: log it (`what` names the request).
    Failed { what: &'static str, error: ApiError },
    /// Count a page (or watch-list) asked for again.
    PageRetried,
    /// Count a watch reopened after an error.
    WatchResumed,
    /// The server does not serve watch-lists: read by list from now on, and say why.
    WatchListRefused(Refused),
    /// A watch-list broke before its bookmark: this read goes on by list; say why.
    WatchListBroke(String),
    /// The server rejected the replica's `shardSelector`: log it as such.
    ShardSelectorRejected(ApiError),
    /// Log that the watch history expired.
    HistoryExpired,
}

/// The next state, and the actions that lead to it.
pub(super) type Step = (State, Vec<Action>);

impl State {
    /// The resourceVersion the view has reached, while a watch is followed: that of the last
    /// event or bookmark it delivered, or of the read it follows.
    pub(super) fn resource_version(&self) -> Option<&str> {
        match self {
            State::Watching { resource_version, .. } => Some(resource_version),
            _ => None,
        }
    }

    /// A monitor that reads its resource by `mode` starts reading it.
    pub(super) fn start(mode: SyncMode) -> Step {
        read(mode, Vec::new())
    }

    /// The transition; see the [module docs](self). An input the state cannot receive is a bug
    /// of the driver's.
    pub(super) fn step(self, input: Input) -> Step {
        match (self, input) {
            (State::Asking(request), input) => answered(request, input),
            (State::BackingOff(request), Input::BackoffElapsed) => ask(request, Vec::new()),
            (State::InitialEvents { routed }, input) => initial_event(routed, input),
            (
                State::Pacing {
                    routed,
                    event_type,
                    object,
                },
                Input::Paced(took),
            ) => paced(routed, event_type, object, took),
            (
                State::Watching {
                    resource_version,
                    events,
                    mode,
                },
                input,
            ) => watched(resource_version, events, mode, input),
            (state, input) => unreachable!("a monitor in {state:?} observed {input:?}"),
        }
    }
}

impl Request {
    /// The first page of a list.
    fn first_page(mode: SyncMode) -> Request {
        Request::Page {
            continue_token: String::new(),
            list_version: None,
            mode,
        }
    }

    fn action(&self) -> Action {
        match self {
            Request::WatchList => Action::OpenWatchList,
            Request::Page { continue_token, .. } => Action::ListPage {
                continue_token: continue_token.clone(),
            },
            Request::Watch { resource_version, .. } => Action::Watch {
                resource_version: resource_version.clone(),
            },
        }
    }
}

/// `actions`, then asking for `request`.
fn ask(request: Request, mut actions: Vec<Action>) -> Step {
    actions.push(request.action());
    (State::Asking(request), actions)
}

/// `actions`, then the backoff before asking for `request` again.
fn back_off(request: Request, mut actions: Vec<Action>) -> Step {
    actions.push(Action::BackOff);
    (State::BackingOff(request), actions)
}

/// `actions`, then a new read of the whole resource by `mode`.
fn read(mode: SyncMode, mut actions: Vec<Action>) -> Step {
    actions.push(Action::ReadStarted);
    let request = match mode {
        SyncMode::WatchList => Request::WatchList,
        SyncMode::List => Request::first_page(mode),
    };
    ask(request, actions)
}

/// The answer to `request`.
fn answered(request: Request, input: Input) -> Step {
    match (request, input) {
        (Request::WatchList, Input::Opened) => (State::InitialEvents { routed: 0 }, Vec::new()),
        (Request::WatchList, Input::Failed(error)) => watch_list_failed(error),
        (
            Request::Page {
                continue_token,
                list_version,
                mode,
            },
            Input::Page(page),
        ) => match of_snapshot(page, list_version.as_deref()) {
            Ok(page) => page_arrived(page, list_version, mode),
            Err(error) => page_failed(continue_token, list_version, mode, error),
        },
        (
            Request::Page {
                continue_token,
                list_version,
                mode,
            },
            Input::Failed(error),
        ) => page_failed(continue_token, list_version, mode, error),
        (Request::Watch { resource_version, mode }, Input::Opened) => (
            State::Watching {
                resource_version,
                events: 0,
                mode,
            },
            Vec::new(),
        ),
        (Request::Watch { resource_version, mode }, Input::Failed(error)) => {
            watch_ended(resource_version, mode, false, Err(error))
        }
        (request, input) => unreachable!("a monitor asking for {request:?} observed {input:?}"),
    }
}

/// A watch-list could not be opened: a refusal reads by list from now on; anything else is
/// asked again.
fn watch_list_failed(error: ApiError) -> Step {
    if watch_list::refuses_watch_list(&error) {
        return refused(Refused::Answered(error), Vec::new());
    }
    let mut actions = Vec::new();
    if watch_list::is_about_the_shard_selector(&error) {
        actions.push(Action::ShardSelectorRejected(error.clone()));
    }
    actions.extend([
        Action::Failed {
            what: "watch-list",
            error,
        },
        Action::PageRetried,
    ]);
    back_off(Request::WatchList, actions)
}

/// `actions`, then, the server not serving watch-lists, this read and every later one by list.
fn refused(why: Refused, mut actions: Vec<Action>) -> Step {
    actions.extend([Action::WatchListRefused(why), Action::ReadRestarted]);
    ask(Request::first_page(SyncMode::List), actions)
}

/// A page of the list whose first page came at `list_version` (none: this is the first) arrived:
/// it is routed, then the next page is asked for or, after the last, the read ends and the watch
/// opens from the list's version.
fn page_arrived(page: ObjectList, list_version: Option<String>, mode: SyncMode) -> Step {
    let list_version = list_version.unwrap_or(page.resource_version);
    let mut actions = vec![Action::Progress, Action::AwaitRoom, Action::RoutePage(page.items)];
    if page.continue_token.is_empty() {
        actions.extend([Action::RouteVanished, Action::ReadCompleted]);
        let watch = Request::Watch {
            resource_version: list_version,
            mode,
        };
        return ask(watch, actions);
    }
    let next = Request::Page {
        continue_token: page.continue_token,
        list_version: Some(list_version),
        mode,
    };
    ask(next, actions)
}

/// A page failed: it is asked for again from its own token, or, the token expired (410), the list
/// starts over from its first page.
fn page_failed(continue_token: String, list_version: Option<String>, mode: SyncMode, error: ApiError) -> Step {
    let expired = error.is_gone();
    let mut actions = vec![Action::Failed { what: "list", error }, Action::PageRetried];
    let retry = if expired {
        actions.push(Action::ReadRestarted);
        Request::first_page(mode)
    } else {
        Request::Page {
            continue_token,
            list_version,
            mode,
        }
    };
    back_off(retry, actions)
}

/// An input while a watch-list streams its initial events.
fn initial_event(routed: u64, input: Input) -> Step {
    match input {
        Input::Event(event) => initial(routed, event),
        Input::Failed(error) => broke(error.to_string()),
        Input::Closed { .. } => broke("the stream closed before its initial-events-end bookmark".into()),
        Input::Silent => refused(Refused::NoBookmark, vec![Action::CloseStream]),
        input => unreachable!("a watch-list's initial events observed {input:?}"),
    }
}

/// An initial event: its bookmark ends the read, which goes on as the watch from its version;
/// an object is routed, once the pace is measured if a check is due.
fn initial(routed: u64, event: WatchEvent) -> Step {
    if event.is_initial_events_end() {
        let watching = State::Watching {
            resource_version: event.object.metadata.resource_version.clone(),
            events: 0,
            mode: SyncMode::WatchList,
        };
        let actions = vec![Action::RouteVanished, Action::ReadCompleted, Action::ContinueAsWatch];
        return (watching, actions);
    }
    let Some(event_type) = EventType::of_watch(event.event_type) else {
        return (State::InitialEvents { routed }, Vec::new());
    };
    let object = event.object;
    if !routed.is_multiple_of(ROOM_CHECK_EVERY) {
        return (
            State::InitialEvents { routed: routed + 1 },
            vec![in_read(event_type, object)],
        );
    }
    // The pace is checked with the room, every ROOM_CHECK_EVERY objects, so that the clock is not
    // read for each one.
    let mut actions = Vec::with_capacity(2);
    if routed == 0 {
        actions.push(Action::Progress);
    }
    actions.push(Action::MeasurePace);
    let pacing = State::Pacing {
        routed,
        event_type,
        object,
    };
    (pacing, actions)
}

/// The pace measured before routing an initial object: too slow, the server is taken not to serve
/// watch-lists; otherwise the object is routed once there is room.
fn paced(routed: u64, event_type: EventType, object: Arc<PartialObjectMeta>, took: Duration) -> Step {
    if took > watch_list::allowed(routed) {
        return refused(Refused::TooSlow(took, routed), vec![Action::CloseStream]);
    }
    let actions = vec![Action::AwaitRoom, in_read(event_type, object)];
    (State::InitialEvents { routed: routed + 1 }, actions)
}

/// The route of an object a watch-list's initial events show.
fn in_read(event_type: EventType, object: Arc<PartialObjectMeta>) -> Action {
    match event_type {
        EventType::Delete => Action::RouteDeleteInRead(object),
        _ => Action::RouteListed(object),
    }
}

/// The watch-list broke before its bookmark: this read goes on by list; the next tries
/// watch-list again.
fn broke(why: String) -> Step {
    let actions = vec![Action::WatchListBroke(why), Action::ReadRestarted];
    ask(Request::first_page(SyncMode::WatchList), actions)
}

/// An input while following a watch: an event is routed and its version remembered.
fn watched(mut resource_version: String, events: u64, mode: SyncMode, input: Input) -> Step {
    let delivered = events > 0;
    let event = match input {
        Input::Event(event) => event,
        Input::Failed(error) => return watch_ended(resource_version, mode, delivered, Err(error)),
        Input::Closed { open_for } => return watch_ended(resource_version, mode, delivered, Ok(open_for)),
        input => unreachable!("a watch observed {input:?}"),
    };
    let object = event.object;
    if !object.metadata.resource_version.is_empty() {
        resource_version.clone_from(&object.metadata.resource_version);
    }
    // The room check sums every partition's counts, so it is made once per ROOM_CHECK_EVERY
    // events, which lets each monitor run at most that far past the bound.
    let room = events.is_multiple_of(ROOM_CHECK_EVERY).then_some(Action::AwaitRoom);
    let route = EventType::of_watch(event.event_type).map(|event_type| Action::Route(event_type, object));
    // Collected from two options, the actions take one allocation of their exact size, or none.
    let actions = room.into_iter().chain(route).collect();
    let watching = State::Watching {
        resource_version,
        events: events + 1,
        mode,
    };
    (watching, actions)
}

/// A watch from `resource_version` ended, closed by the server after it was open so long, or
/// with an error. A 410 starts a new read; any other end reopens the watch from the same version,
/// after the backoff if it failed, or closed at once with nothing.
fn watch_ended(resource_version: String, mode: SyncMode, delivered: bool, ended: Result<Duration, ApiError>) -> Step {
    // A watch of a quiet resource delivers nothing and still made progress if it stayed open:
    // only one that failed, or closed at once with nothing, counts against the backoff.
    // (Counting every quiet watch let a resource that never changes climb to the 30 s step,
    // which its next failed list then waited out.)
    let healthy = ended
        .as_ref()
        .is_ok_and(|open_for| delivered || *open_for >= SHORT_WATCH);
    // A 410 is the server's answer, not a failure: it ends the run of failures of this watch,
    // which the new read must not inherit. (A read after a restart, whose watch had backed off
    // through the outage, otherwise began its list at a step of 3–6 s, and a few injected 500s
    // on that one-page list took the step to 30 s while every item that needed the view
    // waited.)
    let expired = ended.as_ref().is_err_and(ApiError::is_gone);
    let mut actions = Vec::new();
    if delivered || healthy || expired {
        actions.push(Action::Progress);
    }
    let reopen = Request::Watch { resource_version, mode };
    match ended {
        Err(_) if expired => {
            actions.push(Action::HistoryExpired);
            read(mode, actions)
        }
        Err(error) => {
            actions.extend([Action::Failed { what: "watch", error }, Action::WatchResumed]);
            back_off(reopen, actions)
        }
        // A server that keeps closing watches at once is not spun on.
        Ok(_) if !healthy => back_off(reopen, actions),
        Ok(_) => ask(reopen, actions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{StatusReason, WatchEventType};
    use crate::monitor::backoff::{self, Backoff};
    use crate::monitor::MonitorStatus;

    /// [`State::step`], checking that at most one action asks for the next input, and last.
    fn step(state: State, input: Input) -> Step {
        let (state, actions) = state.step(input);
        assert_asks_last(&actions);
        (state, actions)
    }

    fn start(mode: SyncMode) -> Step {
        let (state, actions) = State::start(mode);
        assert_asks_last(&actions);
        (state, actions)
    }

    fn assert_asks_last(actions: &[Action]) {
        let asking = actions.iter().position(|action| {
            matches!(
                action,
                Action::OpenWatchList
                    | Action::ListPage { .. }
                    | Action::Watch { .. }
                    | Action::BackOff
                    | Action::MeasurePace
            )
        });
        if let Some(at) = asking {
            assert_eq!(at, actions.len() - 1, "only the last action asks: {actions:?}");
        }
    }

    fn object(uid: &str, resource_version: &str) -> Arc<PartialObjectMeta> {
        let metadata = crate::api::ObjectMeta {
            name: uid.into(),
            namespace: "default".into(),
            uid: uid.into(),
            resource_version: resource_version.into(),
            ..Default::default()
        };
        Arc::new(PartialObjectMeta {
            metadata,
            ..Default::default()
        })
    }

    fn event(event_type: WatchEventType, uid: &str, resource_version: &str) -> Input {
        let object = object(uid, resource_version);
        Input::Event(WatchEvent { event_type, object })
    }

    fn bookmark(resource_version: &str) -> Input {
        event(WatchEventType::Bookmark, "", resource_version)
    }

    fn initial_events_end(resource_version: &str) -> Input {
        Input::Event(WatchEvent::initial_events_end(resource_version.into()))
    }

    /// A page of `uids` at `resource_version`; the last of its list if `continue_token` is empty.
    fn page(uids: &[&str], resource_version: &str, continue_token: &str) -> Input {
        let items = uids
            .iter()
            .map(|uid| Arc::unwrap_or_clone(object(uid, resource_version)))
            .collect();
        Input::Page(ObjectList {
            items,
            resource_version: resource_version.into(),
            continue_token: continue_token.into(),
            shard_selector: None,
        })
    }

    fn items(uids: &[&str], resource_version: &str) -> Action {
        let Input::Page(page) = page(uids, resource_version, "") else {
            unreachable!()
        };
        Action::RoutePage(page.items)
    }

    fn error(reason: StatusReason) -> ApiError {
        ApiError::status(reason, "test")
    }

    fn list_page(continue_token: &str) -> Action {
        Action::ListPage {
            continue_token: continue_token.into(),
        }
    }

    fn watch(resource_version: &str) -> Action {
        Action::Watch {
            resource_version: resource_version.into(),
        }
    }

    /// What a watch that ended with 410 leads to: progress, then a new read that starts with
    /// `first`.
    fn expired_then(first: Action) -> Vec<Action> {
        vec![Action::Progress, Action::HistoryExpired, Action::ReadStarted, first]
    }

    fn watching(resource_version: &str, events: u64, mode: SyncMode) -> State {
        State::Watching {
            resource_version: resource_version.into(),
            events,
            mode,
        }
    }

    fn asking_page(continue_token: &str, list_version: Option<&str>, mode: SyncMode) -> State {
        State::Asking(Request::Page {
            continue_token: continue_token.into(),
            list_version: list_version.map(Into::into),
            mode,
        })
    }

    /// A monitor that asked for a watch-list and has it open.
    fn streaming_initial_events() -> State {
        let (state, _) = start(SyncMode::WatchList);
        let (state, actions) = step(state, Input::Opened);
        assert!(actions.is_empty(), "{actions:?}");
        assert_eq!(state, State::InitialEvents { routed: 0 });
        state
    }

    #[test]
    fn a_watch_list_read_should_sync_and_go_on_as_the_watch_when_its_bookmark_ends_the_initial_events() {
        let (state, actions) = start(SyncMode::WatchList);
        assert_eq!(actions, [Action::ReadStarted, Action::OpenWatchList]);
        let (state, _) = step(state, Input::Opened);

        let (state, actions) = step(state, event(WatchEventType::Added, "a", "7"));
        assert_eq!(
            actions,
            [Action::Progress, Action::MeasurePace],
            "the first object is progress"
        );
        let (state, actions) = step(state, Input::Paced(Duration::from_millis(5)));
        assert_eq!(actions, [Action::AwaitRoom, Action::RouteListed(object("a", "7"))]);
        let (state, actions) = step(state, event(WatchEventType::Added, "b", "8"));
        assert_eq!(actions, [Action::RouteListed(object("b", "8"))]);
        let (state, actions) = step(state, event(WatchEventType::Deleted, "c", "9"));
        assert_eq!(actions, [Action::RouteDeleteInRead(object("c", "9"))]);
        let (state, actions) = step(state, bookmark("9"));
        assert!(
            actions.is_empty(),
            "a plain bookmark neither routes nor ends the read: {actions:?}"
        );
        assert_eq!(state, State::InitialEvents { routed: 3 });

        let (state, actions) = step(state, initial_events_end("10"));
        assert_eq!(
            actions,
            [Action::RouteVanished, Action::ReadCompleted, Action::ContinueAsWatch],
            "the vanished objects' deletes wait for the bookmark, and the stream goes on as the watch"
        );
        assert_eq!(state, watching("10", 0, SyncMode::WatchList));

        let (state, actions) = step(state, event(WatchEventType::Modified, "a", "11"));
        assert_eq!(
            actions,
            [Action::AwaitRoom, Action::Route(EventType::Update, object("a", "11"))]
        );
        assert_eq!(state, watching("11", 1, SyncMode::WatchList));
    }

    #[test]
    fn an_initial_object_should_wait_for_a_pace_check_when_a_room_check_is_due() {
        let mut state = State::InitialEvents {
            routed: ROOM_CHECK_EVERY - 1,
        };
        let actions;
        (state, actions) = step(state, event(WatchEventType::Added, "a", "1"));
        assert_eq!(actions, [Action::RouteListed(object("a", "1"))]);
        let (state, actions) = step(state, event(WatchEventType::Added, "b", "2"));
        assert_eq!(actions, [Action::MeasurePace], "no progress after the first object");
        let (state, actions) = step(state, Input::Paced(watch_list::allowed(ROOM_CHECK_EVERY)));
        assert_eq!(actions, [Action::AwaitRoom, Action::RouteListed(object("b", "2"))]);
        assert_eq!(
            state,
            State::InitialEvents {
                routed: ROOM_CHECK_EVERY + 1
            }
        );
    }

    #[test]
    fn a_watch_list_should_be_refused_for_good_when_the_server_answers_422_or_400() {
        for reason in [StatusReason::Invalid, StatusReason::BadRequest] {
            let (state, _) = start(SyncMode::WatchList);
            let (state, actions) = step(state, Input::Failed(error(reason)));
            assert_eq!(
                actions,
                [
                    Action::WatchListRefused(Refused::Answered(error(reason))),
                    Action::ReadRestarted,
                    list_page("")
                ]
            );
            assert_eq!(state, asking_page("", None, SyncMode::List));

            let (state, actions) = step(state, page(&["a"], "5", ""));
            assert_eq!(actions.last(), Some(&watch("5")));
            let (state, _) = step(state, Input::Opened);
            let (_, actions) = step(state, Input::Failed(error(StatusReason::Gone)));
            assert_eq!(
                actions,
                expired_then(list_page("")),
                "the next read lists: watch-list is never asked for again"
            );
        }
    }

    #[test]
    fn a_watch_list_should_be_asked_again_after_the_backoff_when_it_fails_otherwise() {
        let (state, _) = start(SyncMode::WatchList);
        let (state, actions) = step(state, Input::Failed(error(StatusReason::ServiceUnavailable)));
        assert_eq!(
            actions,
            [
                Action::Failed {
                    what: "watch-list",
                    error: error(StatusReason::ServiceUnavailable)
                },
                Action::PageRetried,
                Action::BackOff
            ]
        );
        assert_eq!(state, State::BackingOff(Request::WatchList));
        let (state, actions) = step(state, Input::BackoffElapsed);
        assert_eq!(actions, [Action::OpenWatchList]);
        assert_eq!(state, State::Asking(Request::WatchList));
    }

    #[test]
    fn a_watch_list_should_not_be_refused_when_the_server_rejects_the_shard_selector() {
        let rejected = ApiError::status(StatusReason::BadRequest, "unknown parameter shardSelector");
        let (state, _) = start(SyncMode::WatchList);
        let (state, actions) = step(state, Input::Failed(rejected.clone()));
        assert_eq!(
            actions,
            [
                Action::ShardSelectorRejected(rejected.clone()),
                Action::Failed {
                    what: "watch-list",
                    error: rejected
                },
                Action::PageRetried,
                Action::BackOff
            ]
        );
        assert_eq!(state, State::BackingOff(Request::WatchList));
    }

    #[test]
    fn a_watch_list_should_be_refused_when_it_goes_silent_or_slow_before_its_bookmark() {
        let (state, actions) = step(streaming_initial_events(), Input::Silent);
        let read_by_list = |why| {
            vec![
                Action::CloseStream,
                Action::WatchListRefused(why),
                Action::ReadRestarted,
                list_page(""),
            ]
        };
        assert_eq!(actions, read_by_list(Refused::NoBookmark));
        assert_eq!(state, asking_page("", None, SyncMode::List));

        let state = State::InitialEvents {
            routed: ROOM_CHECK_EVERY,
        };
        let (state, _) = step(state, event(WatchEventType::Added, "a", "1"));
        let too_slow = watch_list::allowed(ROOM_CHECK_EVERY) + Duration::from_secs(1);
        let (state, actions) = step(state, Input::Paced(too_slow));
        assert_eq!(
            actions,
            read_by_list(Refused::TooSlow(too_slow, ROOM_CHECK_EVERY)),
            "the object that came too late is not routed"
        );
        assert_eq!(state, asking_page("", None, SyncMode::List));
    }

    #[test]
    fn a_watch_list_should_go_on_by_list_for_this_read_only_when_it_breaks_before_its_bookmark() {
        let closed = step(
            streaming_initial_events(),
            Input::Closed {
                open_for: Duration::ZERO,
            },
        );
        let failed = step(
            streaming_initial_events(),
            Input::Failed(error(StatusReason::InternalError)),
        );
        for (why, (state, actions)) in [
            (
                "the stream closed before its initial-events-end bookmark".to_string(),
                closed,
            ),
            (error(StatusReason::InternalError).to_string(), failed),
        ] {
            assert_eq!(
                actions,
                [Action::WatchListBroke(why), Action::ReadRestarted, list_page("")]
            );
            assert_eq!(state, asking_page("", None, SyncMode::WatchList));
            let (state, _) = step(state, page(&[], "5", ""));
            let (state, _) = step(state, Input::Opened);
            let (_, actions) = step(state, Input::Failed(error(StatusReason::Expired)));
            assert_eq!(
                actions,
                expired_then(Action::OpenWatchList),
                "the next read tries watch-list again"
            );
        }
    }

    #[test]
    fn a_list_should_ask_for_each_page_by_its_continue_token_and_watch_from_the_first_pages_version() {
        let (state, actions) = start(SyncMode::List);
        assert_eq!(actions, [Action::ReadStarted, list_page("")]);
        let (state, actions) = step(state, page(&["a", "b"], "5", "t1"));
        assert_eq!(
            actions,
            [
                Action::Progress,
                Action::AwaitRoom,
                items(&["a", "b"], "5"),
                list_page("t1")
            ]
        );
        assert_eq!(state, asking_page("t1", Some("5"), SyncMode::List));
        let (state, actions) = step(state, page(&["c"], "5", "t2"));
        assert_eq!(actions.last(), Some(&list_page("t2")));
        let (state, actions) = step(state, page(&["d"], "5", ""));
        assert_eq!(
            actions,
            [
                Action::Progress,
                Action::AwaitRoom,
                items(&["d"], "5"),
                Action::RouteVanished,
                Action::ReadCompleted,
                watch("5")
            ],
            "the vanished objects' deletes wait for the last page"
        );
        let (state, actions) = step(state, Input::Opened);
        assert!(actions.is_empty(), "{actions:?}");
        assert_eq!(state, watching("5", 0, SyncMode::List));
    }

    #[test]
    fn a_page_should_be_asked_for_again_from_its_own_token_when_it_fails() {
        let state = asking_page("t1", Some("5"), SyncMode::List);
        let (state, actions) = step(state, Input::Failed(error(StatusReason::InternalError)));
        assert_eq!(
            actions,
            [
                Action::Failed {
                    what: "list",
                    error: error(StatusReason::InternalError)
                },
                Action::PageRetried,
                Action::BackOff
            ]
        );
        let (state, actions) = step(state, Input::BackoffElapsed);
        assert_eq!(actions, [list_page("t1")]);
        assert_eq!(state, asking_page("t1", Some("5"), SyncMode::List));
    }

    #[test]
    fn a_list_should_start_again_from_its_first_page_when_a_token_expired() {
        let state = asking_page("t1", Some("5"), SyncMode::WatchList);
        let (state, actions) = step(state, Input::Failed(error(StatusReason::Expired)));
        assert_eq!(
            actions,
            [
                Action::Failed {
                    what: "list",
                    error: error(StatusReason::Expired)
                },
                Action::PageRetried,
                Action::ReadRestarted,
                Action::BackOff
            ],
            "every object the list routed is unseen again"
        );
        let (state, actions) = step(state, Input::BackoffElapsed);
        assert_eq!(actions, [list_page("")]);
        assert_eq!(state, asking_page("", None, SyncMode::WatchList));
    }

    #[test]
    fn a_list_should_start_again_from_its_first_page_when_a_page_comes_from_another_snapshot() {
        let state = asking_page("t1", Some("5"), SyncMode::List);
        let (state, actions) = step(state, page(&["a"], "6", ""));
        assert!(
            matches!(&actions[..], [Action::Failed { what: "list", error }, Action::PageRetried, Action::ReadRestarted, Action::BackOff] if error.is_gone()),
            "{actions:?}"
        );
        let (_, actions) = step(state, Input::BackoffElapsed);
        assert_eq!(actions, [list_page("")]);
    }

    #[test]
    fn a_watch_should_be_reopened_from_the_last_version_seen_when_it_ends_with_an_error() {
        let state = watching("5", 0, SyncMode::WatchList);
        let (state, _) = step(state, event(WatchEventType::Added, "a", "6"));
        let (state, actions) = step(state, bookmark("9"));
        assert!(actions.is_empty(), "a bookmark routes nothing: {actions:?}");
        assert_eq!(
            state,
            watching("9", 2, SyncMode::WatchList),
            "a bookmark advances the version"
        );

        let (state, actions) = step(state, Input::Failed(error(StatusReason::InternalError)));
        assert_eq!(
            actions,
            [
                Action::Progress,
                Action::Failed {
                    what: "watch",
                    error: error(StatusReason::InternalError)
                },
                Action::WatchResumed,
                Action::BackOff
            ],
            "the watch delivered before it failed"
        );
        let (state, actions) = step(state, Input::BackoffElapsed);
        assert_eq!(actions, [watch("9")]);
        let (state, _) = step(state, Input::Opened);
        assert_eq!(state, watching("9", 0, SyncMode::WatchList));

        let (state, actions) = step(state, Input::Failed(error(StatusReason::ServiceUnavailable)));
        assert_eq!(
            actions.first(),
            Some(&Action::Failed {
                what: "watch",
                error: error(StatusReason::ServiceUnavailable)
            }),
            "a watch that failed with nothing made no progress"
        );
        assert_eq!(
            state,
            State::BackingOff(Request::Watch {
                resource_version: "9".into(),
                mode: SyncMode::WatchList
            })
        );
    }

    #[test]
    fn a_watch_should_be_reopened_at_once_when_it_stayed_open_and_after_the_backoff_when_it_closed_at_once() {
        let state = watching("5", 0, SyncMode::List);
        let open_for = SHORT_WATCH;
        let (state, actions) = step(state, Input::Closed { open_for });
        assert_eq!(
            actions,
            [Action::Progress, watch("5")],
            "a quiet watch that stayed open made progress"
        );

        let (state, _) = step(state, Input::Opened);
        let open_for = SHORT_WATCH / 2;
        let (state, actions) = step(state, Input::Closed { open_for });
        assert_eq!(
            actions,
            [Action::BackOff],
            "a watch closed at once with nothing is not spun on"
        );
        let (state, _) = step(state, Input::BackoffElapsed);
        let (state, _) = step(state, Input::Opened);

        let (state, _) = step(state, event(WatchEventType::Deleted, "a", "6"));
        let (_, actions) = step(state, Input::Closed { open_for });
        assert_eq!(
            actions,
            [Action::Progress, watch("6")],
            "a watch that delivered made progress"
        );
    }

    #[test]
    fn an_expired_watch_should_relist_and_route_vanished_deletes_only_at_the_reads_end() {
        let status = MonitorStatus::default();
        let apply = |actions: &[Action]| {
            for action in actions {
                match action {
                    Action::ReadStarted => status.list_started(),
                    Action::ReadCompleted => status.list_completed(),
                    _ => {}
                }
            }
        };
        let (state, actions) = start(SyncMode::List);
        apply(&actions);
        let (state, actions) = step(state, page(&["a", "b"], "5", ""));
        apply(&actions);
        let (state, _) = step(state, Input::Opened);
        assert!(status.is_complete() && status.relists() == 0);

        let (state, actions) = step(state, Input::Failed(error(StatusReason::Gone)));
        apply(&actions);
        assert_eq!(actions, expired_then(list_page("")));
        assert!(
            status.is_relisting() && status.relists() == 1,
            "the view is incomplete while it is read again"
        );

        let (state, actions) = step(state, page(&["a"], "8", "t1"));
        apply(&actions);
        assert!(
            !actions.contains(&Action::RouteVanished),
            "not before the last page: {actions:?}"
        );
        assert!(status.is_relisting());
        let (_, actions) = step(state, page(&[], "8", ""));
        apply(&actions);
        assert_eq!(
            actions[actions.len() - 3..],
            [Action::RouteVanished, Action::ReadCompleted, watch("8")]
        );
        assert!(status.is_complete(), "the read is over");
    }

    /// The waits a run of `actions` asks for, from `backoff`.
    fn back_off_as(backoff: &mut Backoff, actions: &[Action], waits: &mut Vec<Duration>) {
        for action in actions {
            match action {
                Action::BackOff => waits.push(backoff.next_wait()),
                Action::Progress => backoff.reset(),
                _ => {}
            }
        }
    }

    #[test]
    fn a_read_after_an_expired_watch_should_back_off_from_the_first_step_whatever_the_watch_went_through() {
        let mut backoff = Backoff::default();
        let mut waits = Vec::new();
        // The server restarts: the watch fails while it is down, then on an injected 500.
        let mut state = watching("5", 3, SyncMode::List);
        let outage = || ApiError::Transport {
            source: crate::api::TransportError::new(std::io::Error::other("connection refused")),
        };
        for error in [outage(), outage(), error(StatusReason::InternalError)] {
            let actions;
            (state, actions) = step(state, Input::Failed(error));
            back_off_as(&mut backoff, &actions, &mut waits);
            (state, _) = step(state, Input::BackoffElapsed);
        }
        assert!(
            waits[2] >= backoff::FIRST * 4,
            "the watch backed off through the outage"
        );
        // Back up, the server has no history before its restart: the watch opens, then ends 410.
        let (state, _) = step(state, Input::Opened);
        let (state, actions) = step(state, Input::Failed(error(StatusReason::Gone)));
        back_off_as(&mut backoff, &actions, &mut waits);
        // The new read's first page fails.
        let (_, actions) = step(state, Input::Failed(error(StatusReason::InternalError)));
        back_off_as(&mut backoff, &actions, &mut waits);
        let wait = waits[3];
        assert!(
            wait >= backoff::FIRST && wait < backoff::FIRST * 2,
            "the read waits the first step, not the watch's: {wait:?}"
        );
    }

    #[test]
    fn the_backoff_should_grow_on_failures_and_reset_on_progress() {
        let mut backoff = Backoff::default();
        let mut waits = Vec::new();
        let mut apply = |actions: &[Action], waits: &mut Vec<Duration>| back_off_as(&mut backoff, actions, waits);
        let mut state = asking_page("t1", Some("5"), SyncMode::List);
        for _ in 0..3 {
            let actions;
            (state, actions) = step(state, Input::Failed(error(StatusReason::TooManyRequests)));
            apply(&actions, &mut waits);
            (state, _) = step(state, Input::BackoffElapsed);
        }
        let steps = [backoff::FIRST, backoff::FIRST * 2, backoff::FIRST * 4];
        for (wait, step) in waits.iter().zip(steps) {
            assert!(*wait >= step && *wait < step * 2, "{wait:?} for step {step:?}");
        }

        let (state, actions) = step(state, page(&["a"], "5", "t2"));
        apply(&actions, &mut waits);
        let (_, actions) = step(state, Input::Failed(error(StatusReason::TooManyRequests)));
        apply(&actions, &mut waits);
        let wait = waits[3];
        assert!(
            wait >= backoff::FIRST && wait < backoff::FIRST * 2,
            "back to the first step: {wait:?}"
        );
    }
}
