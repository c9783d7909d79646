//! The [`ClusterApi`] face of the simulated cluster: each trait call is counted once, by verb, and
//! then does exactly what the matching user method does.
//!
//! Counting is what separates the two faces: the GC reaches the cluster only through the trait, so
//! [`ApiCalls`] measures the GC's own traffic, while tests and the demo act as users without
//! disturbing it. Injected [faults](kube_gc::api::layers::Fault) live on the same face: a call is counted first,
//! then answered by a matching fault if one is armed (a request that fails still reached the
//! server), and only otherwise by the store.

use super::pages::{self, Listing};
use super::store::present;
use super::{Part, SimCluster, Written};
use futures::StreamExt;
use kube_gc::api::layers::{Count, Layer, Request, Verb};
use kube_gc::api::shard::ShardSelector;
use kube_gc::api::{
    ApiError, CallCount, ClusterApi, DeleteOptions, Discovery, EventRecord, Gvr, ObjectList, PartialObjectMeta, Patch,
    WatchStream,
};

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
    /// PUTs of a status.
    pub update: u64,
}

impl ApiCalls {
    /// Every call, all verbs together.
    pub fn total(&self) -> u64 {
        self.get + self.list + self.watch + self.patch + self.delete + self.create_event + self.discover + self.update
    }
}

impl ApiCalls {
    /// The calls `count` counted, by verb.
    pub(super) fn from_count(count: &Count) -> ApiCalls {
        ApiCalls {
            get: count.of(Verb::Get),
            list: count.of(Verb::List),
            watch: count.of(Verb::Watch),
            patch: count.of(Verb::Patch),
            delete: count.of(Verb::Delete),
            create_event: count.of(Verb::Create),
            update: count.of(Verb::Update),
            discover: count.of(Verb::Discovery),
        }
    }
}

impl SimCluster {
    /// Lets an armed fault answer `request`, else runs `call`; counts the call either way.
    fn counted<T>(&self, request: Request<'_>, call: impl FnOnce() -> Result<T, ApiError>) -> Result<T, ApiError> {
        let result = self.faults.check(request).and_then(|()| call());
        self.calls.record(request.verb, &result);
        result
    }
}

impl ClusterApi for SimCluster {
    async fn discover(&self) -> Result<Discovery, ApiError> {
        self.counted(Verb::Discovery.into(), || Ok(self.state.lock().discover()))
    }

    async fn get(&self, gvr: &Gvr, namespace: &str, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.counted(Request::on(Verb::Get, gvr), || self.get_object(gvr, namespace, name))
    }

    async fn patch(&self, gvr: &Gvr, namespace: &str, name: &str, edit: &Patch) -> Result<PartialObjectMeta, ApiError> {
        self.counted(Request::on(Verb::Patch, gvr), || {
            self.patch_object(gvr, namespace, name, edit.patch_type, &edit.body)
        })
    }

    async fn delete(&self, gvr: &Gvr, namespace: &str, name: &str, options: &DeleteOptions) -> Result<(), ApiError> {
        // The user face's delete, without the presented copy of the object that it answers with
        // and this face does not.
        self.counted(Request::on(Verb::Delete, gvr), || {
            self.state.lock().delete_stored(gvr, namespace, name, options).map(drop)
        })
    }

    async fn list_page(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        self.counted(Request::on(Verb::List, gvr), || {
            self.list_page_now(gvr, shard, continue_token, limit)
        })
    }

    async fn watch(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        self.counted(Request::on(Verb::Watch, gvr), || {
            let stream = self.state.lock().watch(gvr, resource_version)?;
            Ok(in_shards(stream, shard))
        })
    }

    /// The newest state is never older than a version the cluster handed out, so
    /// `resource_version` needs no wait.
    async fn watch_list(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        _resource_version: &str,
    ) -> Result<WatchStream, ApiError> {
        self.counted(Request::on(Verb::Watch, gvr), || {
            let start = self.state.lock().watch_with_initial(gvr, "", true)?;
            Ok(in_shards(start.with_initial_events_end(), shard))
        })
    }

    async fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        field_manager: &str,
        config: &serde_json::Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.counted(Request::on(Verb::Patch, gvr), || {
            let writes = self.writes(false).by(field_manager);
            writes
                .apply(gvr, namespace, name, config, false)
                .map(Written::into_object)
        })
    }

    async fn list_whole(&self, gvr: &Gvr) -> Result<ObjectList, ApiError> {
        self.counted(Request::on(Verb::List, gvr), || self.list_page_now(gvr, None, "", 0))
    }

    async fn get_whole(&self, gvr: &Gvr, name: &str) -> Result<PartialObjectMeta, ApiError> {
        self.counted(Request::on(Verb::Get, gvr), || self.get_object(gvr, "", name))
    }

    async fn replace_status(&self, gvr: &Gvr, object: &PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.counted(Request::on(Verb::Update, gvr), || {
            let writes = self.writes(false).to(Part::Status);
            writes.update(gvr, object.clone()).map(Written::into_object)
        })
    }

    fn call_counts(&self) -> Vec<CallCount> {
        self.calls.call_counts().unwrap_or_default()
    }

    async fn create_event(&self, event: &EventRecord) -> Result<(), ApiError> {
        self.counted(Verb::Create.into(), || {
            self.state.lock().events.push(event.clone());
            Ok(())
        })
    }
}

impl SimCluster {
    /// One page of a list on the trait face: see [`ClusterApi::list_page`].
    fn list_page_now(
        &self,
        gvr: &Gvr,
        shard: Option<&ShardSelector>,
        continue_token: &str,
        limit: usize,
    ) -> Result<ObjectList, ApiError> {
        let token = (!continue_token.is_empty()).then_some(continue_token);
        let collection = pages::collection(gvr, None);
        let page = self.pages.page(&collection, token, (limit > 0).then_some(limit), || {
            let mut snapshot = self.snapshot(gvr, None)?;
            if let Some(shard) = shard {
                snapshot
                    .items
                    .retain(|o| shard.matches(&o.metadata.namespace, &o.metadata.uid));
            }
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
            shard_selector: shard.map(ShardSelector::to_string),
        })
    }
}

/// The events of `stream` in the shards `shard` selects (bookmarks and errors always pass).
fn in_shards(stream: WatchStream, shard: Option<&ShardSelector>) -> WatchStream {
    let Some(shard) = shard.cloned() else {
        return stream;
    };
    stream
        .filter(move |event| {
            let keep = match event {
                Ok(e) if e.event_type != kube_gc::api::WatchEventType::Bookmark => {
                    shard.matches(&e.object.metadata.namespace, &e.object.metadata.uid)
                }
                _ => true,
            };
            std::future::ready(keep)
        })
        .boxed()
}
