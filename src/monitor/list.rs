//! The paginated LIST: how a monitor reads its whole resource when watch-list is off or refused
//! ([`SyncMode::List`](super::SyncMode::List)).
//!
//! Invariants: one page at a time is held and routed before the next is asked for; the deletes
//! of the objects the list did not show wait for its last page; and every page routed comes from
//! the snapshot of the list's first page.
//!
//! [`State::step`](super::state::State::step) reads a list: each page is routed as it arrives,
//! taking the objects it shows out of those unseen, as updates if known, as adds if not; once the last page is in, the rest are routed as deletes. A failed page is asked for again
//! from its own continue token; a 410 means the token expired, and the list starts again from its
//! first page, with every object it had routed unseen again. So does a page from another snapshot
//! than the first page's ([`of_snapshot`]).

use crate::api::{ApiError, ObjectList, StatusReason};

/// `page`, if it belongs to the list whose first page came at `list_version` (none: it is the
/// first). Every page of one list comes from its first page's snapshot; a page from another (a
/// restarted server that resumed the token on a list of its own) would end the list short, and
/// every object of the pages not read would be routed as deleted. Such a page is answered as an
/// expired token is, so that the list starts over.
pub(super) fn of_snapshot(page: ObjectList, list_version: Option<&str>) -> Result<ObjectList, ApiError> {
    match list_version {
        Some(version) if version != page.resource_version => Err(ApiError::status(
            StatusReason::Expired,
            format!(
                "a continued page came at resourceVersion {}, not at the list's {version}",
                page.resource_version
            ),
        )),
        _ => Ok(page),
    }
}
