//! [`History`]: one resource's recorded history, and the events a relist implies.
//!
//! Invariant: after every step, `written` holds exactly the objects the events written so far say
//! exist, each as last written, so replaying the stream up to here rebuilds the informer's store.
//!
//! The watcher reports a relist as `Init`, one `InitApply` per listed object, then `InitDone`. A
//! relist carries no event types, so they are derived from `written`, as client-go's
//! `DeltaFIFO.Replace` derives them from its known objects: a UID not written yet is ADDED, one
//! whose resourceVersion changed is MODIFIED, an unchanged one is nothing, and, at `InitDone`, a
//! written UID the relist did not show is DELETED with its last written state (upstream's
//! `DeletedFinalStateUnknown`). Listed objects go out as they arrive and deletions after the
//! listing, in Replace's order. A relist cut short by an error is followed by a new `Init`; what
//! its objects wrote stays in `written` and is diffed again by the next one.
//!
//! A watch `Apply` does not say whether the object is new either: it is ADDED for an unknown UID
//! and MODIFIED otherwise, as an informer's update handler would see it.

use kube::runtime::watcher::Event;
use kube_gc::api::{PartialObjectMeta, WatchEvent, WatchEventType};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The state of one resource's recording; see the [module docs](self).
#[derive(Debug, Default)]
pub struct History {
    /// UID → the object as last written; only [`History::step`] changes it.
    written: HashMap<String, PartialObjectMeta>,
    /// UIDs listed by the relist under way; `None` outside a relist.
    listed: Option<HashSet<String>>,
}

impl History {
    /// Applies one watcher event and passes the watch events it implies to `emit`, in order.
    pub fn step(&mut self, event: Event<PartialObjectMeta>, emit: &mut impl FnMut(WatchEvent)) {
        match event {
            Event::Init => self.listed = Some(HashSet::new()),
            Event::InitApply(object) => {
                let listed = self.listed.get_or_insert_default();
                listed.insert(object.metadata.uid.clone());
                self.write_listed(object, emit);
            }
            Event::InitDone => self.delete_unlisted(emit),
            Event::Apply(object) => {
                let event_type = if self.written.contains_key(&object.metadata.uid) {
                    WatchEventType::Modified
                } else {
                    WatchEventType::Added
                };
                self.write(event_type, object, emit);
            }
            Event::Delete(object) => {
                // The server's final state, which is newer than the last written one.
                self.written.remove(&object.metadata.uid);
                emit(WatchEvent {
                    event_type: WatchEventType::Deleted,
                    object: Arc::new(object),
                });
            }
        }
    }

    /// A listed object: ADDED when new, MODIFIED when its resourceVersion moved, else nothing.
    fn write_listed(&mut self, object: PartialObjectMeta, emit: &mut impl FnMut(WatchEvent)) {
        let event_type = match self.written.get(&object.metadata.uid) {
            None => WatchEventType::Added,
            Some(last) if last.metadata.resource_version != object.metadata.resource_version => {
                WatchEventType::Modified
            }
            Some(_) => return,
        };
        self.write(event_type, object, emit);
    }

    /// The end of a relist: every written object it did not list is gone.
    fn delete_unlisted(&mut self, emit: &mut impl FnMut(WatchEvent)) {
        let listed = self.listed.take().unwrap_or_default();
        for (_, object) in self.written.extract_if(|uid, _| !listed.contains(uid)) {
            emit(WatchEvent {
                event_type: WatchEventType::Deleted,
                object: Arc::new(object),
            });
        }
    }

    fn write(&mut self, event_type: WatchEventType, object: PartialObjectMeta, emit: &mut impl FnMut(WatchEvent)) {
        self.written.insert(object.metadata.uid.clone(), object.clone());
        emit(WatchEvent {
            event_type,
            object: Arc::new(object),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc::api::ObjectMeta;

    fn object(uid: &str, resource_version: &str) -> PartialObjectMeta {
        PartialObjectMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            metadata: ObjectMeta {
                name: format!("cm-{uid}"),
                namespace: "default".into(),
                uid: uid.into(),
                resource_version: resource_version.into(),
                ..ObjectMeta::default()
            },
            ..PartialObjectMeta::default()
        }
    }

    /// Steps through `events` and returns what they wrote, as (type, UID, resourceVersion).
    fn run(history: &mut History, events: Vec<Event<PartialObjectMeta>>) -> Vec<(WatchEventType, String, String)> {
        let mut out = Vec::new();
        for event in events {
            history.step(event, &mut |e| {
                let m = std::sync::Arc::unwrap_or_clone(e.object).metadata;
                out.push((e.event_type, m.uid, m.resource_version));
            });
        }
        out
    }

    fn relist(objects: &[(&str, &str)]) -> Vec<Event<PartialObjectMeta>> {
        let listed = objects.iter().map(|(uid, rv)| Event::InitApply(object(uid, rv)));
        std::iter::once(Event::Init)
            .chain(listed)
            .chain([Event::InitDone])
            .collect()
    }

    fn e(event_type: WatchEventType, uid: &str, rv: &str) -> (WatchEventType, String, String) {
        (event_type, uid.into(), rv.into())
    }

    #[test]
    fn the_first_list_should_be_written_as_added_events_in_list_order() {
        let mut history = History::default();
        let out = run(&mut history, relist(&[("a", "1"), ("b", "2")]));
        assert_eq!(
            out,
            [e(WatchEventType::Added, "a", "1"), e(WatchEventType::Added, "b", "2")]
        );
    }

    #[test]
    fn a_relist_should_write_new_as_added_changed_as_modified_vanished_as_deleted_and_unchanged_not_at_all() {
        let mut history = History::default();
        run(&mut history, relist(&[("same", "1"), ("changed", "2"), ("gone", "3")]));
        let out = run(&mut history, relist(&[("same", "1"), ("changed", "7"), ("new", "8")]));
        assert_eq!(
            out,
            [
                e(WatchEventType::Modified, "changed", "7"),
                e(WatchEventType::Added, "new", "8"),
                e(WatchEventType::Deleted, "gone", "3"),
            ]
        );
        // What remains is what the stream says exists: an empty relist deletes exactly that.
        let mut remaining = run(&mut history, relist(&[]));
        remaining.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(
            remaining,
            [
                e(WatchEventType::Deleted, "changed", "7"),
                e(WatchEventType::Deleted, "new", "8"),
                e(WatchEventType::Deleted, "same", "1"),
            ]
        );
    }

    #[test]
    fn a_vanished_object_should_be_deleted_with_its_last_written_state() {
        let mut history = History::default();
        run(&mut history, relist(&[("a", "1")]));
        run(&mut history, vec![Event::Apply(object("a", "5"))]);
        let out = run(&mut history, relist(&[]));
        assert_eq!(out, [e(WatchEventType::Deleted, "a", "5")]);
    }

    #[test]
    fn a_relist_cut_short_should_be_diffed_again_by_the_next_one() {
        let mut history = History::default();
        run(&mut history, relist(&[("a", "1"), ("b", "1")]));
        // The relist fails after one page: no InitDone, so nothing is deleted yet.
        let cut = run(&mut history, vec![Event::Init, Event::InitApply(object("a", "2"))]);
        assert_eq!(cut, [e(WatchEventType::Modified, "a", "2")]);
        let out = run(&mut history, relist(&[("a", "2")]));
        assert_eq!(out, [e(WatchEventType::Deleted, "b", "1")]);
    }

    #[test]
    fn watch_applies_should_be_added_when_unknown_and_modified_when_known() {
        let mut history = History::default();
        run(&mut history, relist(&[("a", "1")]));
        let out = run(
            &mut history,
            vec![
                Event::Apply(object("a", "2")),
                Event::Apply(object("b", "3")),
                Event::Delete(object("a", "4")),
                Event::Apply(object("a", "5")),
            ],
        );
        assert_eq!(
            out,
            [
                e(WatchEventType::Modified, "a", "2"),
                e(WatchEventType::Added, "b", "3"),
                e(WatchEventType::Deleted, "a", "4"),
                e(WatchEventType::Added, "a", "5"),
            ]
        );
    }
}
