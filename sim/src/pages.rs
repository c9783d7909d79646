//! Paginated lists: every page of one list comes from the same snapshot, so a list read in pages
//! is exactly the collection at the first page's resourceVersion, whatever is written meanwhile.
//! Both faces of the simulated cluster page this way, each with its own [`Pages`]: the HTTP server
//! ([`super::http`]) and the [`ClusterApi`](kube_gc::api::ClusterApi) face the collector uses.
//!
//! The first page of a list with a limit takes a snapshot (shared object handles, not copies) and,
//! when more pages follow, keeps it under a fresh id; its continue token names the [`Pages`]'
//! epoch, the id and the offset of the next page. The page that ends the list lets the snapshot
//! go, so a finished list holds no objects alive. A bounded number of snapshots is kept, least
//! recently used first out; a token whose snapshot is gone is answered with 410 Expired, as a real
//! server answers a token older than its storage's compaction, and the client starts the list
//! again.
//!
//! Invariants: a token resumes only the listing it was issued for. The epoch is random per
//! [`Pages`], so a token from a server that stopped (ids start again at 1 on its successor) is
//! Expired, never a page of whichever list the successor numbered the same; and a listing
//! remembers the collection it snapshotted, so a token sent with another collection's request is
//! refused (400) rather than answered with another type's objects.

use kube_gc::api::{ApiError, Gvr, PartialObjectMeta, StatusReason};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many paginated lists can be in progress at once.
const KEPT_SNAPSHOTS: usize = 64;

/// A snapshot being served in pages.
pub(super) struct Listing {
    pub(super) items: Vec<Arc<PartialObjectMeta>>,
    pub(super) resource_version: u64,
}

/// The snapshots of paginated lists in progress.
pub(super) struct Pages {
    /// Each kept listing with the collection it lists, which its continue tokens must be sent with.
    kept: Mutex<LruCache<u64, (String, Arc<Listing>)>>,
    next_id: AtomicU64,
    /// Tells this server's tokens from those of another incarnation, whose ids collide.
    epoch: u32,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_SNAPSHOTS).unwrap_or(NonZeroUsize::MIN),
            )),
            next_id: AtomicU64::new(1),
            epoch: rand::random(),
        }
    }
}

/// Names the collection a list reads, as [`Pages`] keeps it beside the listing: `gvr`, in `namespace` if
/// any.
pub(super) fn collection(gvr: &Gvr, namespace: Option<&str>) -> String {
    match namespace {
        Some(namespace) => format!("{gvr} in namespace {namespace:?}"),
        None => gvr.to_string(),
    }
}

/// One page of a listing.
pub(super) struct Page {
    pub(super) listing: Arc<Listing>,
    range: Range<usize>,
    /// Names the next page; `None` on the last.
    pub(super) continue_token: Option<String>,
    /// Items of the listing after this page.
    pub(super) remaining: usize,
}

impl Page {
    /// The page's objects.
    pub(super) fn items(&self) -> &[Arc<PartialObjectMeta>] {
        &self.listing.items[self.range.clone()]
    }
}

impl Pages {
    /// The page a request for `collection` asks for, with at most `limit` items (`None`: all that
    /// are left): the one `continue_token` names, or without a token the first page of the
    /// snapshot `first` takes.
    pub(super) fn page(
        &self,
        collection: &str,
        continue_token: Option<&str>,
        limit: Option<usize>,
        first: impl FnOnce() -> Result<Listing, ApiError>,
    ) -> Result<Page, ApiError> {
        let (listing, offset, id) = match continue_token {
            Some(token) => {
                let (listing, offset, id) = self.resume(collection, token)?;
                (listing, offset, Some(id))
            }
            None => (Arc::new(first()?), 0, None),
        };
        let len = listing.items.len();
        let start = offset.min(len);
        let end = limit.map_or(len, |l| start.saturating_add(l).min(len));
        let remaining = len - end;
        let continue_token = if remaining > 0 {
            let id = id.unwrap_or_else(|| {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                self.kept.lock().put(id, (collection.to_string(), Arc::clone(&listing)));
                id
            });
            Some(format!("{:08x}-{id}-{end}", self.epoch))
        } else {
            if let Some(id) = id {
                self.kept.lock().pop(&id);
            }
            None
        };
        Ok(Page {
            listing,
            range: start..end,
            continue_token,
            remaining,
        })
    }

    /// The listing, offset and listing id a continue token sent with a request for `collection`
    /// names.
    fn resume(&self, collection: &str, token: &str) -> Result<(Arc<Listing>, usize, u64), ApiError> {
        let mut parts = token.splitn(3, '-');
        let mut next = || parts.next().unwrap_or_default();
        let (epoch, id, offset) = (
            u32::from_str_radix(next(), 16),
            next().parse::<u64>(),
            next().parse::<usize>(),
        );
        let (Ok(epoch), Ok(id), Ok(offset)) = (epoch, id, offset) else {
            return Err(ApiError::status(
                StatusReason::BadRequest,
                format!("invalid continue token {token:?}"),
            ));
        };
        let kept = (epoch == self.epoch)
            .then(|| self.kept.lock().get(&id).cloned())
            .flatten();
        let (listed, listing) = kept.ok_or_else(|| {
            ApiError::status(
                StatusReason::Expired,
                "The provided continue parameter is too old to display a consistent list result. You can start a \
                 new list without the continue parameter.",
            )
        })?;
        if listed != collection {
            return Err(ApiError::status(
                StatusReason::BadRequest,
                format!("the continue token {token:?} was issued for a list of {listed}, not of {collection}"),
            ));
        }
        Ok((listing, offset, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(names: &[&str]) -> Listing {
        let items = names
            .iter()
            .map(|name| {
                let mut object = PartialObjectMeta::default();
                object.metadata.name = name.to_string();
                Arc::new(object)
            })
            .collect();
        Listing {
            items,
            resource_version: 7,
        }
    }

    fn names(page: &Page) -> Vec<&str> {
        page.items().iter().map(|o| o.metadata.name.as_str()).collect()
    }

    fn first_page(pages: &Pages, collection: &str, names: &[&str]) -> Page {
        pages
            .page(collection, None, Some(1), || Ok(listing(names)))
            .expect("a first page")
    }

    fn unused() -> Result<Listing, ApiError> {
        panic!("a continued list takes no new snapshot")
    }

    #[test]
    fn a_list_should_be_read_whole_in_pages_and_its_snapshot_let_go_at_the_end() {
        let pages = Pages::default();
        let first = first_page(&pages, "pods", &["a", "b"]);
        assert_eq!((names(&first), first.remaining), (vec!["a"], 1));
        let token = first.continue_token.expect("a second page");
        let last = pages
            .page("pods", Some(&token), Some(1), unused)
            .expect("the last page");
        assert_eq!((names(&last), last.continue_token.as_deref()), (vec!["b"], None));
        let again = pages.page("pods", Some(&token), Some(1), unused).err();
        assert_eq!(again.and_then(|e| e.reason()), Some(StatusReason::Expired));
    }

    #[test]
    fn a_token_of_another_incarnation_should_be_expired_even_where_its_id_is_taken() {
        let stopped = Pages {
            epoch: 1,
            ..Pages::default()
        };
        let restarted = Pages {
            epoch: 2,
            ..Pages::default()
        };
        let token = first_page(&stopped, "pods", &["a", "b"]).continue_token.unwrap();
        first_page(&restarted, "pods", &["x", "y"]);
        let answer = restarted.page("pods", Some(&token), Some(1), unused).err();
        assert_eq!(answer.and_then(|e| e.reason()), Some(StatusReason::Expired));
    }

    #[test]
    fn a_token_sent_with_another_collections_request_should_be_refused() {
        let pages = Pages::default();
        let token = first_page(&pages, "pods", &["a", "b"]).continue_token.unwrap();
        let answer = pages.page("configmaps", Some(&token), Some(1), unused).err();
        assert_eq!(answer.and_then(|e| e.reason()), Some(StatusReason::BadRequest));
        let pods = pages
            .page("pods", Some(&token), Some(1), unused)
            .expect("the pods' own page");
        assert_eq!(names(&pods), ["b"]);
    }

    #[test]
    fn a_malformed_token_should_be_a_bad_request() {
        let pages = Pages::default();
        for token in ["", "x", "1-2", "zz-1-2", "0-a-1"] {
            let answer = pages.page("pods", Some(token), Some(1), unused).err();
            assert_eq!(
                answer.and_then(|e| e.reason()),
                Some(StatusReason::BadRequest),
                "{token:?}"
            );
        }
    }
}
