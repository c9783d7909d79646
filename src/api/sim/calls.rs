//! The [`ClusterApi`] face of the simulated cluster: each trait call is counted once, by verb, and
//! then does exactly what the matching user method does.
//!
//! Counting is what separates the two faces: the GC reaches the cluster only through the trait, so
//! [`ApiCalls`] measures the GC's own traffic, while tests and the demo act as users without
//! disturbing it. Injected [faults](super::Fault) live on the same face: a call is counted first,
//! then answered by a matching fault if one is armed (a request that fails still reached the
//! server), and only otherwise by the store.

use super::pages::Listing;
use super::store::present;
use super::SimCluster;
use crate::api::{
    ApiError, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, PatchType,
    WatchStream,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many [`ClusterApi`] calls were made, by verb. User actions are not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApiCalls {
    /// GETs.
    pub get: u64,
    /// LISTs, one per page.
    pub list: u64,
    /// WATCHes opened.
    pub watch: u64,
    /// PATCHes.
    pub patch: u64,
    /// DELETEs.
    pub delete: u64,
    /// Events recorded.
    pub create_event: u64,
    /// Discovery requests.
    pub discover: u64,
}

impl ApiCalls {
    /// Every call, all verbs together.
    pub fn total(&self) -> u64 {
        self.get + self.list + self.watch + self.patch + self.delete + self.create_event + self.discover
    }
}

/// The verbs of [`ClusterApi`], as counted in [`ApiCalls`] and matched by
/// [`Fault`](super::Fault)s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// [`ClusterApi::get`].
    Get,
    /// [`ClusterApi::list_page`]: one page of a list.
    List,
    /// [`ClusterApi::watch`].
    Watch,
    /// [`ClusterApi::patch`].
    Patch,
    /// [`ClusterApi::delete`].
    Delete,
    /// [`ClusterApi::discover`].
    Discover,
    /// [`ClusterApi::create_event`].
    CreateEvent,
}

/// Lock-free per-verb counters, so counting never contends with the state lock.
#[derive(Default)]
pub(super) struct CallCounters([AtomicU64; 7]);

impl CallCounters {
    fn count(&self, verb: Verb) {
        // Relaxed: the counters are statistics; they order nothing else.
        self.0[verb as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub(super) fn snapshot(&self) -> ApiCalls {
        let at = |verb: Verb| self.0[verb as usize].load(Ordering::Relaxed);
        ApiCalls {
            get: at(Verb::Get),
            list: at(Verb::List),
            watch: at(Verb::Watch),
            patch: at(Verb::Patch),
            delete: at(Verb::Delete),
            create_event: at(Verb::CreateEvent),
            discover: at(Verb::Discover),
        }
    }
}

impl SimCluster {
    /// Counts a `verb` call about `gvr`, then lets an armed fault answer it.
    fn call(&self, verb: Verb, gvr: Option<&Gvr>) -> Result<(), ApiError> {
        self.calls.count(verb);
        self.faults.check(verb, gvr)
    }
}

impl ClusterApi for SimCluster {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.call(Verb::Discover, None)?;
        Ok(self.state.lock().discover())
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.call(Verb::Get, Some(gvr))?;
        self.get_object(gvr, namespace, name)
    }

    async fn patch(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.call(Verb::Patch, Some(gvr))?;
        self.patch_object(gvr, namespace, name, patch_type, body)
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        self.call(Verb::Delete, Some(gvr))?;
        self.delete_object(gvr, namespace, name, options).map(drop)
    }

    async fn list_page(&self, gvr: &Gvr, continue_token: &str, limit: usize) -> Result<ObjectList, ApiError> {
        self.call(Verb::List, Some(gvr))?;
        let token = (!continue_token.is_empty()).then_some(continue_token);
        let page = self.pages.page(token, (limit > 0).then_some(limit), || {
            let snapshot = self.snapshot(gvr, None)?;
            Ok(Listing {
                items: snapshot.items,
                resource_version: snapshot.resource_version,
            })
        })?;
        let def = self.type_def(gvr)?;
        Ok(ObjectList {
            items: page.items().iter().map(|o| present(o, gvr, &def)).collect(),
            resource_version: page.listing.resource_version.to_string(),
            continue_token: page.continue_token.unwrap_or_default(),
        })
    }

    async fn watch(&self, gvr: &Gvr, resource_version: &str) -> Result<WatchStream, ApiError> {
        self.call(Verb::Watch, Some(gvr))?;
        self.state.lock().watch(gvr, resource_version)
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.call(Verb::CreateEvent, None)?;
        self.state.lock().events.push(event.clone());
        Ok(())
    }
}
