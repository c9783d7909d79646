//! [`Listing`]: how a resource's watcher gets the objects that exist before it watches, and when
//! a resource gives up watch-list for paginated lists.
//!
//! By default each resource is synced as kube-controller-manager's informers sync it since
//! Kubernetes 1.32, by watch-list (KEP-3157): one WATCH with `sendInitialEvents=true`,
//! `resourceVersionMatch=NotOlderThan` and bookmarks streams the objects as ADDED, then a BOOKMARK
//! annotated `k8s.io/initial-events-end: "true"`, then the changes. Every relist is one too.
//! `--feature-gates WatchListClient=false` (the controller manager's gate) lists instead: a
//! paginated LIST, then a WATCH from its resourceVersion.
//!
//! Invariant: a resource falls back from [`Listing::WatchList`] to [`Listing::ListWatch`] at most
//! once and never returns, and only before its first listing completes. Until then every watch
//! its watcher starts asks for initial events, so a refused watch start is a refused watch-list;
//! afterwards a refused start may be that of a plain watch resuming, which says nothing about
//! watch-list, and a server that has streamed one listing supports it. It falls back when:
//!
//! - the server refuses the watch with 422 Invalid (what kube-apiserver answers with its
//!   `WatchList` gate off) or 400 Bad Request ([`refusal`]);
//! - the stream stays silent for [`END_BOOKMARK_SILENCE`] before its initial-events-end bookmark.

use kube::runtime::watcher;
use std::fmt;
use std::time::Duration;

/// How a resource's watcher lists; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Listing {
    /// A watch that streams the existing objects first (`sendInitialEvents=true`).
    WatchList,
    /// A paginated LIST (500 objects a page), then a WATCH from its resourceVersion.
    ListWatch,
}

impl Listing {
    /// The watcher's configuration for this listing.
    pub fn config(self) -> watcher::Config {
        match self {
            Listing::WatchList => watcher::Config::default().streaming_lists(),
            Listing::ListWatch => watcher::Config::default(),
        }
    }
}

impl fmt::Display for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Listing::WatchList => "watch-list",
            Listing::ListWatch => "list",
        })
    }
}

/// `loadgen record --feature-gates`: `WatchListClient` (on by default) chooses the listing every
/// resource starts with. Any other gate, or a value that is not a boolean, is refused.
pub fn parse_feature_gates(text: &str) -> Result<Listing, String> {
    let [watch_list_client] = kube_gc::feature_gates::parse(text, [("WatchListClient", true)])?;
    Ok(if watch_list_client {
        Listing::WatchList
    } else {
        Listing::ListWatch
    })
}

/// How long a watch-list's stream may go without an object before its initial-events-end bookmark
/// until the resource falls back to lists.
///
/// A server that implements watch-list streams the objects back to back from its cache and sends
/// the bookmark right after the last one (kube-apiserver within about a second), so however many
/// objects there are, a healthy stream is never silent for long before the bookmark; the bound is
/// on silence rather than on the whole listing, which for a million objects takes minutes. A
/// server that takes the watch without implementing watch-list (an aggregated API server on an old
/// library, a proxy that drops the parameters) answers it as a plain watch from resourceVersion
/// "0": the objects, no such bookmark, then only changes, so its stream goes quiet. 30 s is many
/// times the gap between two events of one stream on a loaded server, and well within the 290 s
/// after which the server ends the watch and the watcher would start the same watch-list again.
/// Bookmarks without the annotation are not progress and do not count; nor does the time after an
/// error, which the watcher spends backing off.
pub const END_BOOKMARK_SILENCE: Duration = Duration::from_secs(30);

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
    fn the_client_gate_should_choose_the_listing() {
        assert_eq!(parse_feature_gates(""), Ok(Listing::WatchList));
        assert_eq!(parse_feature_gates("WatchListClient=true"), Ok(Listing::WatchList));
        assert_eq!(parse_feature_gates("WatchListClient=false"), Ok(Listing::ListWatch));
    }

    #[test]
    fn the_servers_gate_or_a_bad_value_should_be_refused() {
        assert_eq!(
            parse_feature_gates("WatchList=false"),
            Err("unrecognized feature gate: WatchList (known: WatchListClient)".to_string())
        );
        assert_eq!(
            parse_feature_gates("WatchListClient=off"),
            Err("invalid value of WatchListClient: off, err: not a boolean".to_string())
        );
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
    fn each_listing_should_configure_its_watcher() {
        use watcher::InitialListStrategy;
        assert_eq!(
            Listing::WatchList.config().initial_list_strategy,
            InitialListStrategy::StreamingList
        );
        assert_eq!(
            Listing::ListWatch.config(),
            watcher::Config::default(),
            "the paginated list as before"
        );
    }
}
