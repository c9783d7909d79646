//! The paginated LIST: how a monitor reads its whole resource when watch-list is off or refused
//! ([`SyncMode::List`](super::SyncMode::List)).
//!
//! Invariants: one page at a time is held and routed before the next is asked for; the deletes
//! of the objects the list did not show wait for its last page; and every page routed comes from
//! the snapshot of the list's first page.

use super::{KnownSet, Watcher, LIST_PAGE_SIZE};
use crate::api::{ApiError, ClusterApi, ObjectList, PartialObjectMeta, StatusReason};

impl<C: ClusterApi> Watcher<C> {
    /// Lists the resource page by page until a whole list is routed, and returns its
    /// resourceVersion (its first page's). Every object the monitor knew is in `unseen`: objects
    /// the list shows are taken out of it and routed as updates if known, as adds if not; once the
    /// last page is in, the rest are routed as deletes ([`Watcher::route_vanished`]). A failed
    /// page is asked for again from its own continue token; a 410 means the token expired, and the
    /// list starts again from its first page, with every object it had routed unseen again. So
    /// does a page from another snapshot than the first page's ([`of_snapshot`]).
    pub(super) async fn list(&mut self, mut unseen: KnownSet) -> String {
        let mut token = String::new();
        let mut resource_version = None;
        loop {
            let page = match self
                .api
                .list_page(&self.gvr, self.selector(), &token, LIST_PAGE_SIZE)
                .await
                .and_then(|page| of_snapshot(page, resource_version.as_deref()))
            {
                Ok(page) => page,
                Err(e) => {
                    self.failures.failed(&self.gvr, "list", &e);
                    self.status.page_retried();
                    if e.is_gone() {
                        unseen.extend(std::mem::take(&mut self.known));
                        token.clear();
                        resource_version = None;
                    }
                    self.backoff.wait().await;
                    continue;
                }
            };
            self.backoff.reset();
            self.failures.recovered(&self.gvr);
            let resource_version = resource_version.get_or_insert(page.resource_version).clone();
            self.router.room().await;
            self.route_page(page.items, &mut unseen);
            if page.continue_token.is_empty() {
                self.route_vanished(unseen).await;
                return resource_version;
            }
            token = page.continue_token;
        }
    }

    /// Routes one list page, taking each object it shows out of `unseen`.
    fn route_page(&mut self, items: Vec<PartialObjectMeta>, unseen: &mut KnownSet) {
        for item in items {
            self.route_listed(item.metadata, unseen);
        }
    }
}

/// `page`, if it belongs to the list whose first page came at `list_version` (none: it is the
/// first). Every page of one list comes from its first page's snapshot; a page from another (a
/// restarted server that resumed the token on a list of its own) would end the list short, and
/// every object of the pages not read would be routed as deleted. Such a page is answered as an
/// expired token is, so that the list starts over.
fn of_snapshot(page: ObjectList, list_version: Option<&str>) -> Result<ObjectList, ApiError> {
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
