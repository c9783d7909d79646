//! `dryRun=All`: a user's write answered without being made.
//!
//! Every check of the write runs (validation, preconditions, conflicts, the containers' rules)
//! and the answer is the object the write would store, or its error, but nothing is stored, no
//! resourceVersion is taken, no watch event is sent and no cascade starts. The store's writers
//! obey [`State::dry_run`](super::store::State), set for the length of one operation under the
//! state's lock, so no other write can see it set.

use super::store::State;
use super::{Deletion, SimCluster};
use crate::api::{ApiError, DeleteOptions, Gvr, PartialObjectMeta, PatchType};
use serde_json::Value;

/// The user's writes of a [`SimCluster`], made or only answered (a dry run); see the
/// [module docs](self).
pub struct Writes<'a> {
    pub(super) cluster: &'a SimCluster,
    pub(super) dry_run: bool,
}

impl Writes<'_> {
    fn run<T>(&self, write: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.cluster.state.lock();
        state.dry_run = self.dry_run;
        let out = write(&mut state);
        state.dry_run = false;
        out
    }

    /// [`SimCluster::create`].
    pub fn create(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.run(|state| state.create(gvr, obj))
    }

    /// [`SimCluster::update`].
    pub fn update(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<PartialObjectMeta, ApiError> {
        self.run(|state| state.update(gvr, obj))
    }

    /// [`SimCluster::patch_object`].
    pub fn patch_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &Value,
    ) -> Result<PartialObjectMeta, ApiError> {
        self.run(|state| state.patch(gvr, namespace, name, patch_type, body))
    }

    /// [`SimCluster::delete_object`].
    pub fn delete_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        self.run(|state| state.delete(gvr, namespace, name, opts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StatusReason;
    use crate::sim::tests::{object, pods, NS};
    use serde_json::json;

    #[test]
    fn a_dry_run_should_answer_each_write_and_store_nothing() {
        let cluster = SimCluster::new();
        cluster.create(&pods(), object(NS, "p")).expect("pod");
        let rv = cluster.resource_version();
        let mut watch = cluster.watch_objects(&pods(), &rv.to_string()).expect("watch").stream;

        let dry = cluster.dry_run();
        let created = dry.create(&pods(), object(NS, "q")).expect("a dry create");
        assert_eq!(created.metadata.name, "q");
        assert!(!created.metadata.uid.is_empty(), "answered as it would be stored");
        let taken = dry.create(&pods(), object(NS, "p")).expect_err("the name is taken");
        assert_eq!(taken.reason(), Some(StatusReason::AlreadyExists));
        let label = json!({"metadata": {"labels": {"a": "b"}}});
        let patched = dry
            .patch_object(&pods(), NS, "p", PatchType::Merge, &label)
            .expect("a dry patch");
        assert_eq!(patched.metadata.labels["a"], "b");
        let deletion = dry
            .delete_object(&pods(), NS, "p", &DeleteOptions::default())
            .expect("a dry delete");
        assert!(deletion.is_removed());

        assert!(cluster.get_object(&pods(), NS, "q").is_err(), "nothing created");
        let p = cluster.get_object(&pods(), NS, "p").expect("nothing deleted");
        assert!(p.metadata.labels.is_empty(), "nothing patched");
        assert_eq!(cluster.resource_version(), rv, "no resourceVersion taken");
        let event = futures::FutureExt::now_or_never(futures::StreamExt::next(&mut watch));
        assert!(event.is_none(), "no watch event: {event:?}");
        cluster
            .create(&pods(), object(NS, "q"))
            .expect("writes go on after a dry run");
    }
}
