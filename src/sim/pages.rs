//! Paginated lists: every page of one list comes from the same snapshot, so a list read in pages
//! is exactly the collection at the first page's resourceVersion, whatever is written meanwhile.
//! Both faces of the simulated cluster page this way, each with its own [`Pages`]: the HTTP server
//! ([`super::http`]) and the [`ClusterApi`](crate::api::ClusterApi) face the collector uses.
//!
//! The first page of a list with a limit takes a snapshot (shared object handles, not copies) and,
//! when more pages follow, keeps it under a fresh id; its continue token names the id and the
//! offset of the next page. The page that ends the list lets the snapshot go, so a finished list
//! holds no objects alive. A bounded number of snapshots is kept, least recently used first out; a
//! token whose snapshot is gone is answered with 410 Expired, as a real server answers a token
//! older than its storage's compaction, and the client starts the list again.

use crate::api::{ApiError, PartialObjectMeta, StatusReason};
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
    kept: Mutex<LruCache<u64, Arc<Listing>>>,
    next_id: AtomicU64,
}

impl Default for Pages {
    fn default() -> Self {
        Pages {
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(KEPT_SNAPSHOTS).unwrap_or(NonZeroUsize::MIN),
            )),
            next_id: AtomicU64::new(1),
        }
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
    /// The page a request asks for, with at most `limit` items (`None`: all that are left): the
    /// one `continue_token` names, or without a token the first page of the snapshot `first`
    /// takes.
    pub(super) fn page(
        &self,
        continue_token: Option<&str>,
        limit: Option<usize>,
        first: impl FnOnce() -> Result<Listing, ApiError>,
    ) -> Result<Page, ApiError> {
        let (listing, offset, id) = match continue_token {
            Some(token) => {
                let (listing, offset, id) = self.resume(token)?;
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
                self.kept.lock().put(id, Arc::clone(&listing));
                id
            });
            Some(format!("{id}-{end}"))
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

    /// The listing, offset and listing id a continue token names.
    fn resume(&self, token: &str) -> Result<(Arc<Listing>, usize, u64), ApiError> {
        let (id, offset) = token
            .split_once('-')
            .and_then(|(id, offset)| Some((id.parse::<u64>().ok()?, offset.parse::<usize>().ok()?)))
            .ok_or_else(|| ApiError::status(StatusReason::BadRequest, format!("invalid continue token {token:?}")))?;
        let listing = self.kept.lock().get(&id).cloned().ok_or_else(|| {
            ApiError::status(
                StatusReason::Expired,
                "The provided continue parameter is too old to display a consistent list result. You can start a \
                 new list without the continue parameter.",
            )
        })?;
        Ok((listing, offset, id))
    }
}
