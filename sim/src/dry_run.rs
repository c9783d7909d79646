//! `dryRun=All`: a user's write answered without being made.
//!
//! Every check of the write runs (validation, preconditions, conflicts, the containers' rules)
//! and the answer is the object the write would store, or its error, but nothing is stored, no
//! resourceVersion is taken, no watch event is sent and no cascade starts. The store's writers
//! obey [`State::dry_run`](super::store::State), set for the length of one operation under the
//! state's lock, so no other write can see it set.
//!
//! The same way, [`Writes::by`] names the field manager a user's creates, updates, patches and
//! applies are recorded as ([`super::managed`]); every write answers with the managed fields it
//! left (or, in a dry run, would leave).

use super::managed::{Author, ManagedFieldsList};
use super::store::State;
use super::{Deletion, Part, SimCluster};
use kube_gc::api::{ApiError, DeleteOptions, Gvr, PartialObjectMeta, PatchType, StatusReason};
use serde_json::Value;

/// The user's writes of a [`SimCluster`], made or only answered (a dry run), and recorded as a
/// field manager's or no one's; see the [module docs](self).
pub struct Writes<'a> {
    pub(super) cluster: &'a SimCluster,
    pub(super) dry_run: bool,
    /// The field manager the creates, updates, patches and applies are recorded as.
    pub(super) manager: Option<String>,
    /// The part of each object the updates and patches write ([`Part`]).
    pub(super) part: Part,
}

/// An object as a write left it (or, in a dry run, would leave it), with its managed fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// The object, as read through the version written.
    pub object: PartialObjectMeta,
    /// Its `metadata.managedFields`; `None` when no manager owns any of its fields.
    pub managed_fields: Option<ManagedFieldsList>,
    /// Whether the write created the object.
    pub created: bool,
}

impl Written {
    /// The object alone.
    pub fn into_object(self) -> PartialObjectMeta {
        self.object
    }
}

impl Writes<'_> {
    /// The same writes, recorded in the objects' managed fields as made by `manager`.
    #[must_use]
    pub fn by(mut self, manager: impl Into<String>) -> Self {
        self.manager = Some(manager.into());
        self
    }

    /// The same writes, made to `part` of each object: [`Part::Status`] writes go to the `status`
    /// subresource, which changes nothing but `.status`.
    #[must_use]
    pub fn to(mut self, part: Part) -> Self {
        self.part = part;
        self
    }

    /// Runs one write under the state's lock, with the dry-run flag and the author set for its
    /// length.
    fn run<T>(&self, gvr: &Gvr, write: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.cluster.state.lock();
        state.dry_run = self.dry_run;
        state.part = self.part;
        state.author = self.manager.as_ref().map(|manager| Author {
            manager: manager.clone(),
            api_version: gvr.api_version(),
        });
        let out = write(&mut state);
        state.dry_run = false;
        state.part = Part::Main;
        state.author = None;
        out
    }

    /// Runs a write of one object, which answers with the object and whether it created it, and
    /// pairs them with the managed fields it left.
    fn run_written(
        &self,
        gvr: &Gvr,
        write: impl FnOnce(&mut State) -> Result<(PartialObjectMeta, bool), ApiError>,
    ) -> Result<Written, ApiError> {
        self.run(gvr, |state| {
            state.written_fields = None;
            let (object, created) = write(state)?;
            let managed_fields = state.written_fields.take();
            Ok(Written {
                object,
                managed_fields,
                created,
            })
        })
    }

    /// [`SimCluster::create`].
    pub fn create(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<Written, ApiError> {
        self.run_written(gvr, |state| Ok((state.create(gvr, obj)?, true)))
    }

    /// [`SimCluster::update`].
    pub fn update(&self, gvr: &Gvr, obj: PartialObjectMeta) -> Result<Written, ApiError> {
        self.run_written(gvr, |state| Ok((state.update(gvr, obj)?, false)))
    }

    /// [`SimCluster::patch_object`].
    pub fn patch_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        body: &Value,
    ) -> Result<Written, ApiError> {
        self.run_written(gvr, |state| {
            Ok((state.patch(gvr, namespace, name, patch_type, body)?, false))
        })
    }

    /// Server-side apply of the configuration `config` to the object `namespace`/`name`, which is
    /// created if it does not exist (see `patch::apply`). The writes must be
    /// [`by`](Self::by) a field manager (422 otherwise). Changing a field another manager owns is
    /// 409 Conflict unless `force`.
    pub fn apply(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        config: &Value,
        force: bool,
    ) -> Result<Written, ApiError> {
        if self.manager.as_deref().unwrap_or_default().is_empty() {
            return Err(ApiError::status(
                StatusReason::Invalid,
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        self.run_written(gvr, |state| state.apply(gvr, namespace, name, config, force))
    }

    /// [`SimCluster::delete_object`].
    pub fn delete_object(
        &self,
        gvr: &Gvr,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        self.run(gvr, |state| state.delete(gvr, namespace, name, opts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{object, pods, NS};
    use kube_gc::api::StatusReason;
    use serde_json::json;

    #[test]
    fn a_dry_run_should_answer_each_write_and_store_nothing() {
        let cluster = SimCluster::new();
        cluster.create(&pods(), object(NS, "p")).expect("pod");
        let rv = cluster.resource_version();
        let mut watch = cluster.watch_objects(&pods(), &rv.to_string()).expect("watch").stream;

        let dry = cluster.dry_run();
        let created = dry.create(&pods(), object(NS, "q")).expect("a dry create").object;
        assert_eq!(created.metadata.name, "q");
        assert!(!created.metadata.uid.is_empty(), "answered as it would be stored");
        let taken = dry.create(&pods(), object(NS, "p")).expect_err("the name is taken");
        assert_eq!(taken.reason(), Some(StatusReason::AlreadyExists));
        let label = json!({"metadata": {"labels": {"a": "b"}}});
        let patched = dry
            .patch_object(&pods(), NS, "p", PatchType::Merge, &label)
            .expect("a dry patch")
            .object;
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
