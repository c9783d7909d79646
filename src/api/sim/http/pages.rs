//! Paginated lists: every page of one list comes from the same snapshot, so a list read in pages
//! is exactly the collection at the first page's resourceVersion, whatever is written meanwhile.
//!
//! The first page of a list with `limit` takes a snapshot (shared object handles, not copies),
//! filters it, and keeps it under a fresh id; its continue token names the id and the offset of
//! the next page. A bounded number of snapshots is kept, least recently used first out; a token
//! whose snapshot is gone is answered with 410 Expired, as a real server answers a token older
//! than its storage's compaction, and the client starts the list again.

use crate::api::{ApiError, PartialObjectMeta, StatusReason};
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many paginated lists can be in progress at once.
const KEPT_SNAPSHOTS: usize = 64;

/// A filtered snapshot being served in pages.
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
pub(super) struct Page<'a> {
    pub(super) items: &'a [Arc<PartialObjectMeta>],
    pub(super) continue_token: Option<String>,
    pub(super) remaining: usize,
}

impl Pages {
    /// The listing, offset and listing id a continue token names.
    pub(super) fn resume(&self, token: &str) -> Result<(Arc<Listing>, usize, u64), ApiError> {
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

    /// The page of `listing` at `offset` with at most `limit` items. When a page follows, the
    /// listing is kept under `id` (a fresh one for a first page) for the next request.
    pub(super) fn page<'a>(
        &self,
        listing: &'a Arc<Listing>,
        offset: usize,
        limit: Option<usize>,
        id: Option<u64>,
    ) -> Page<'a> {
        let start = offset.min(listing.items.len());
        let end = limit.map_or(listing.items.len(), |l| {
            start.saturating_add(l).min(listing.items.len())
        });
        let remaining = listing.items.len() - end;
        let continue_token = (remaining > 0).then(|| {
            let id = id.unwrap_or_else(|| {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                self.kept.lock().put(id, Arc::clone(listing));
                id
            });
            format!("{id}-{end}")
        });
        Page {
            items: &listing.items[start..end],
            continue_token,
            remaining,
        }
    }
}
