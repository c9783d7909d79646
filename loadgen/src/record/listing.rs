//! How a resource's watcher gets the objects that exist before it watches ([`SyncMode`], the
//! collector's monitors' own modes), and when a resource gives up watch-list for paginated lists.
//!
//! By default each resource is synced as kube-controller-manager's informers sync it since
//! Kubernetes 1.32, by watch-list (KEP-3157): one WATCH with `sendInitialEvents=true`,
//! `resourceVersionMatch=NotOlderThan` and bookmarks streams the objects as ADDED, then a BOOKMARK
//! annotated `k8s.io/initial-events-end: "true"`, then the changes. Every relist is one too.
//! `--feature-gates WatchListClient=false` (the controller manager's gate) lists instead: a
//! paginated LIST, then a WATCH from its resourceVersion.
//!
//! Invariant: a resource falls back from [`SyncMode::WatchList`] to [`SyncMode::List`] at most
//! once and never returns, and only before its first listing completes. Until then every watch
//! its watcher starts asks for initial events, so a refused watch start is a refused watch-list;
//! afterwards a refused start may be that of a plain watch resuming, which says nothing about
//! watch-list, and a server that has streamed one listing supports it. It falls back when:
//!
//! - the server refuses the watch with 422 Invalid (what kube-apiserver answers with its
//!   `WatchList` gate off) or 400 Bad Request ([`refusal`]);
//! - the stream brings no object for [`INITIAL_EVENTS_END_WAIT`] before its initial-events-end
//!   bookmark (the collector's monitors' bound, whose docs say why 30 s).
//!
//! [`INITIAL_EVENTS_END_WAIT`]: kube_gc::monitor::INITIAL_EVENTS_END_WAIT

use kube::runtime::watcher;
use kube_gc::monitor::SyncMode;

/// The watcher's configuration for `mode`: a streaming list, or the paginated list (500 objects
/// a page) then a watch from its resourceVersion.
pub fn watcher_config(mode: SyncMode) -> watcher::Config {
    match mode {
        SyncMode::WatchList => watcher::Config::default().streaming_lists(),
        SyncMode::List => watcher::Config::default(),
    }
}

/// The server's answer, as text for the log, when `error` is its refusal to start a watch with 400
/// Bad Request or 422 Invalid; `None` for any other error.
pub fn refusal(error: &watcher::Error) -> Option<String> {
    let watcher::Error::WatchStartFailed(kube::Error::Api(status)) = error else {
        return None;
    };
    matches!(status.code, 400 | 422).then(|| format!("{} {}: {}", status.code, status.reason, status.message))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use kube::core::Status;

    /// A watch start that the server answered with `code` and `reason`.
    pub fn refused_start(code: u16, reason: &str) -> watcher::Error {
        let status = Status::failure("sendInitialEvents is forbidden", reason).with_code(code);
        watcher::Error::WatchStartFailed(kube::Error::Api(status.boxed()))
    }

    #[test]
    fn a_watch_start_refused_with_400_or_422_should_be_a_refusal_with_the_servers_reason() {
        assert_eq!(
            refusal(&refused_start(422, "Invalid")).as_deref(),
            Some("422 Invalid: sendInitialEvents is forbidden")
        );
        assert_eq!(
            refusal(&refused_start(400, "BadRequest")).as_deref(),
            Some("400 BadRequest: sendInitialEvents is forbidden")
        );
    }

    #[test]
    fn other_errors_should_not_be_refusals() {
        let forbidden = refused_start(403, "Forbidden");
        let unavailable = refused_start(503, "ServiceUnavailable");
        let status = Status::failure("too old", "Invalid").with_code(422).boxed();
        // Mid-stream, or of a list: not the server's answer to the watch request.
        let in_stream = watcher::Error::WatchError(status.clone());
        let list = watcher::Error::InitialListFailed(kube::Error::Api(status));
        for error in [
            forbidden,
            unavailable,
            in_stream,
            list,
            watcher::Error::NoResourceVersion,
        ] {
            assert_eq!(refusal(&error), None, "{error}");
        }
    }

    #[test]
    fn each_mode_should_configure_its_watcher() {
        use watcher::InitialListStrategy;
        assert_eq!(
            watcher_config(SyncMode::WatchList).initial_list_strategy,
            InitialListStrategy::StreamingList
        );
        assert_eq!(
            watcher_config(SyncMode::List),
            watcher::Config::default(),
            "the paginated list as before"
        );
    }
}
