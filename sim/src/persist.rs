//! Saved cluster states: a restored cluster serves the same types and holds the same objects, with
//! their UIDs and resourceVersions, and its resourceVersion counter goes on from where the saved
//! one stopped, so no resourceVersion is ever handed out twice.
//!
//! # Format
//!
//! JSON Lines in UTF-8, version 1. The first line is a header:
//!
//! ```text
//! {"format":"kube-gc-sim-state","version":1,"resourceVersion":1234,"objects":2,"types":[…]}
//! ```
//!
//! - `resourceVersion`: the last resourceVersion the cluster handed out.
//! - `objects`: how many object lines follow; any other number is a truncated or edited file.
//! - `types`: the [`TypeDef`] of every served type that no CRD object describes, built-ins
//!   included, so that types registered directly (as the presets' custom types are) are served
//!   again.
//! - `crdStorageRotations` (left out when empty): for each type a CRD describes whose storage
//!   version changed, its `group`, `resource` and the resourceVersions at which each storage
//!   generation began (`super::storage_version`); the CRD objects say the rest.
//!
//! Then one line per object, in stored form (with `apiVersion` and `kind` empty, since they depend
//! on the version it is read through), naming its type by group and resource:
//!
//! ```text
//! {"group":"apps","resource":"deployments","object":{"apiVersion":"","kind":"","metadata":{…},"spec":{…}}}
//! ```
//!
//! An object that field managers wrote has its `managedFields` list (`super::managed`) beside it,
//! under `managedFields`; a line without it (as every line of an older save) restores an object no
//! manager owns anything of.
//!
//! CRD objects come first, so that the types they describe are served again before any of their
//! objects is read.
//!
//! # Model
//!
//! - Saving takes the state lock once and, under it, only clones the objects' `Arc`s; the
//!   serialising happens outside the lock. The snapshot is consistent, and the server is held up
//!   for one pass over its maps rather than for the whole write.
//! - Loading builds a cluster no one can reach yet, one line at a time, without reading the whole
//!   file into memory.
//!
//! # Not kept
//!
//! Watch history: every type's history in a restored cluster starts after the restored
//! resourceVersion, so a watch from an older one gets 410 Gone and its client relists, as after an
//! etcd compaction. Nor the parts that belong to a test rather than to the cluster: the events
//! recorded through [`ClusterApi::create_event`](kube_gc::api::ClusterApi::create_event), injected
//! faults, watch delays and blackouts, failing discovery, and the call counters.

use super::managed::ManagedFieldsList;
use super::store::{RestoreRefusal, State};
use super::types::{CRD_GROUP, CRD_RESOURCE};
use super::{SimCluster, TypeDef};
use kube_gc::api::PartialObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `format` of the header line.
const FORMAT: &str = "kube-gc-sim-state";
/// The only version this build writes and reads.
const VERSION: u32 = 1;
/// Buffer size for both directions: large enough that a million small lines take few system calls.
const BUFFER_BYTES: usize = 1 << 20;

/// Why a cluster state could not be saved or restored. Line numbers count from 1, the header.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing failed.
    #[error("reading or writing the state failed")]
    Io(#[from] io::Error),
    /// The state is empty: there is not even a header line.
    #[error("the state is empty")]
    Empty,
    /// A line is not JSON of the shape its place calls for.
    #[error("line {line} is malformed")]
    Malformed {
        /// The line.
        line: usize,
        /// What the JSON parser found.
        #[source]
        source: serde_json::Error,
    },
    /// The header names another format.
    #[error("this is not a kube-gc simulated cluster state (its format is {format:?}, not {FORMAT:?})")]
    NotAState {
        /// The header's `format`.
        format: String,
    },
    /// The header names a version this build does not read.
    #[error("state version {version} is not supported; this build reads version {VERSION}")]
    UnsupportedVersion {
        /// The header's `version`.
        version: u32,
    },
    /// An object's type is neither listed in the header nor described by a CRD before it.
    #[error("line {line}: no type {resource:?} is served in group {group:?}")]
    UnknownType {
        /// The line.
        line: usize,
        /// The object's group.
        group: String,
        /// The object's resource.
        resource: String,
    },
    /// Two objects of one type have the same namespace and name.
    #[error("line {line}: a second {resource} named {namespace:?}/{name:?}")]
    Taken {
        /// The line.
        line: usize,
        /// The object's resource.
        resource: String,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
    /// An object's resourceVersion is not a number, or is newer than the header's.
    #[error("line {line}: resourceVersion {resource_version:?} is not a number at most the state's {counter}")]
    BadResourceVersion {
        /// The line.
        line: usize,
        /// The object's resourceVersion.
        resource_version: String,
        /// The header's resourceVersion.
        counter: u64,
    },
    /// The number of object lines is not the header's.
    #[error("the header announces {expected} objects but {found} follow: the state is truncated or was edited")]
    CountMismatch {
        /// The header's `objects`.
        expected: usize,
        /// The object lines read.
        found: usize,
    },
}

/// The first line: what follows and where the counter stands.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Header {
    format: String,
    version: u32,
    resource_version: u64,
    objects: usize,
    types: Vec<TypeDef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    crd_storage_rotations: Vec<CrdStorageRotations>,
}

/// The storage generations of a type a CRD describes.
#[derive(Serialize, Deserialize)]
struct CrdStorageRotations {
    group: String,
    resource: String,
    rotations: Vec<u64>,
}

/// Just enough of the header to tell whether the rest can be read.
#[derive(Deserialize)]
struct Preamble {
    #[serde(default)]
    format: String,
    #[serde(default)]
    version: u32,
}

/// One object line: borrowed when written, owned when read.
#[derive(Serialize, Deserialize)]
struct Entry<'a> {
    group: Cow<'a, str>,
    resource: Cow<'a, str>,
    object: Cow<'a, PartialObjectMeta>,
    #[serde(default, rename = "managedFields", skip_serializing_if = "Option::is_none")]
    managed_fields: Option<Cow<'a, serde_json::Value>>,
}

/// A consistent snapshot of what a save writes.
struct Saved {
    header: Header,
    /// Each type's group, resource and objects with their managed fields, the CRD type first.
    objects: Vec<(String, String, Vec<SavedObject>)>,
}

/// An object and its managed fields, as saved.
type SavedObject = (Arc<PartialObjectMeta>, Option<ManagedFieldsList>);

impl State {
    /// What a save writes, as of now.
    fn saved(&self) -> Saved {
        let (custom, types): (Vec<&TypeDef>, Vec<&TypeDef>) = self.defs().partition(|def| self.is_crd_backed(def));
        let types: Vec<TypeDef> = types.into_iter().cloned().collect();
        let crd_storage_rotations = custom
            .into_iter()
            .filter(|def| !def.storage_rotations.is_empty())
            .map(|def| CrdStorageRotations {
                group: def.group.clone(),
                resource: def.resource.clone(),
                rotations: def.storage_rotations.clone(),
            })
            .collect();
        let mut objects: Vec<(String, String, Vec<SavedObject>)> = self
            .defs()
            .map(|def| {
                let stored = self
                    .stored(&def.group, &def.resource)
                    .map(|o| (Arc::clone(o), self.fields.get(&o.metadata.uid)))
                    .collect();
                (def.group.clone(), def.resource.clone(), stored)
            })
            .collect();
        // Stable: the other types keep the store's order.
        objects.sort_by_key(|(group, resource, _)| !(group == CRD_GROUP && resource == CRD_RESOURCE));
        let count = objects.iter().map(|(_, _, stored)| stored.len()).sum();
        Saved {
            header: Header {
                format: FORMAT.to_string(),
                version: VERSION,
                resource_version: self.resource_version(),
                objects: count,
                types,
                crd_storage_rotations,
            },
            objects,
        }
    }
}

impl SimCluster {
    /// Writes the cluster's state to `w` in the [format](self) of this module and returns how many
    /// objects it wrote. The state is read in one step, so it is consistent even while requests
    /// are being served; `w` is buffered here.
    pub fn save_state(&self, w: impl Write) -> Result<usize, StateError> {
        let saved = self.state.lock().saved();
        let mut w = BufWriter::with_capacity(BUFFER_BYTES, w);
        write_line(&mut w, &saved.header)?;
        for (group, resource, stored) in &saved.objects {
            for (object, managed_fields) in stored {
                let entry = Entry {
                    group: Cow::Borrowed(group),
                    resource: Cow::Borrowed(resource),
                    object: Cow::Borrowed(object),
                    managed_fields: managed_fields.as_deref().map(Cow::Borrowed),
                };
                write_line(&mut w, &entry)?;
            }
        }
        w.flush()?;
        Ok(saved.header.objects)
    }

    /// [`save_state`](Self::save_state) into the file at `path`, atomically: the state goes to
    /// [`temporary_state_path`]`(path)`, is synced to disk, and then renamed over `path`, so that
    /// `path` always holds a whole state, the old or the new one.
    pub fn save_state_file(&self, path: &Path) -> Result<usize, StateError> {
        let temporary = temporary_state_path(path);
        let file = File::create(&temporary)?;
        let saved = self.save_state(&file)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        Ok(saved)
    }

    /// The cluster a [saved state](self) describes, keeping the last `history` watch events of
    /// each type from now on. Every watch of it starts after the restored resourceVersion.
    ///
    /// ```
    /// use kube_gc_sim::{SimCluster, DEFAULT_HISTORY};
    ///
    /// let cluster = SimCluster::new();
    /// let mut saved = Vec::new();
    /// cluster.save_state(&mut saved).unwrap();
    /// let restored = SimCluster::load_state(saved.as_slice(), DEFAULT_HISTORY).unwrap();
    /// assert_eq!(restored.resource_version(), cluster.resource_version());
    /// ```
    pub fn load_state(r: impl Read, history: usize) -> Result<SimCluster, StateError> {
        let mut lines = Lines::new(r);
        let header = read_header(&mut lines)?;
        let expected = header.objects;
        let counter = header.resource_version;
        let rotations = header.crd_storage_rotations;
        let mut state = State::restored(header.types, history, counter);
        let mut found = 0;
        let mut crds_pending = false;
        while let Some((line, text)) = lines.next()? {
            let entry: Entry = serde_json::from_str(text).map_err(|source| StateError::Malformed { line, source })?;
            let is_crd = entry.group == CRD_GROUP && entry.resource == CRD_RESOURCE;
            if crds_pending && !is_crd {
                state.sync_crds();
                crds_pending = false;
            }
            crds_pending |= is_crd;
            let object = Arc::new(entry.object.into_owned());
            let managed_fields = entry.managed_fields.map(|list| Arc::new(list.into_owned()));
            state
                .restore(&entry.group, &entry.resource, Arc::clone(&object), managed_fields)
                .map_err(|refusal| refusal_error(refusal, line, (&entry.group, &entry.resource), &object, counter))?;
            found += 1;
        }
        if crds_pending {
            state.sync_crds();
        }
        for r in rotations {
            state.restore_storage_rotations(&r.group, &r.resource, r.rotations);
        }
        state.resume_terminating();
        if found != expected {
            return Err(StateError::CountMismatch { expected, found });
        }
        Ok(SimCluster::from_state(state))
    }
}

/// Where [`SimCluster::save_state_file`] writes before it renames: `path` with `.tmp` appended.
pub fn temporary_state_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

fn write_line(w: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value)?;
    w.write_all(b"\n")
}

/// Reads and checks the header line.
fn read_header(lines: &mut Lines<impl Read>) -> Result<Header, StateError> {
    let (line, text) = lines.next()?.ok_or(StateError::Empty)?;
    let malformed = |source| StateError::Malformed { line, source };
    let preamble: Preamble = serde_json::from_str(text).map_err(malformed)?;
    if preamble.format != FORMAT {
        return Err(StateError::NotAState {
            format: preamble.format,
        });
    }
    if preamble.version != VERSION {
        return Err(StateError::UnsupportedVersion {
            version: preamble.version,
        });
    }
    serde_json::from_str(text).map_err(malformed)
}

/// The error for an object line the store refused.
fn refusal_error(
    refusal: RestoreRefusal,
    line: usize,
    (group, resource): (&str, &str),
    object: &PartialObjectMeta,
    counter: u64,
) -> StateError {
    let meta = &object.metadata;
    match refusal {
        RestoreRefusal::UnknownType => StateError::UnknownType {
            line,
            group: group.to_string(),
            resource: resource.to_string(),
        },
        RestoreRefusal::Taken => StateError::Taken {
            line,
            resource: resource.to_string(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
        },
        RestoreRefusal::BadResourceVersion => StateError::BadResourceVersion {
            line,
            resource_version: meta.resource_version.clone(),
            counter,
        },
    }
}

/// The lines of a state, numbered from 1, read into one reused buffer.
struct Lines<R> {
    reader: BufReader<R>,
    text: String,
    number: usize,
}

impl<R: Read> Lines<R> {
    fn new(r: R) -> Self {
        Lines {
            reader: BufReader::with_capacity(BUFFER_BYTES, r),
            text: String::new(),
            number: 0,
        }
    }

    /// The next line, without its line end, and its number; `None` at the end.
    fn next(&mut self) -> Result<Option<(usize, &str)>, StateError> {
        self.text.clear();
        if self.reader.read_line(&mut self.text)? == 0 {
            return Ok(None);
        }
        self.number += 1;
        // Without the line end, the JSON parser's own positions read "line 1, column N".
        Ok(Some((self.number, self.text.trim_end_matches(['\n', '\r']))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{crds, gadget_crd, gadgets, object, pods, NS};
    use futures::StreamExt;
    use kube_gc::api::{DeleteOptions, Gvr, OwnerReference, PropagationPolicy, StatusReason};
    use serde_json::json;
    use std::time::Duration;

    /// Every object of every served type, as read through its preferred version.
    fn everything(cluster: &SimCluster) -> Vec<PartialObjectMeta> {
        let (defs, _) = cluster.served_types();
        defs.iter()
            .flat_map(|def| cluster.list_objects(&Gvr::new(&def.group, &def.preferred, &def.resource)))
            .collect()
    }

    fn round_trip(cluster: &SimCluster) -> SimCluster {
        let mut saved = Vec::new();
        let count = cluster.save_state(&mut saved).expect("save");
        assert_eq!(count, cluster.object_count());
        SimCluster::load_state(saved.as_slice(), 10).expect("load")
    }

    /// A cluster with a bit of everything a state must keep: an owner and a dependent, a
    /// finalizer, an object being deleted, a spec, a CRD with an object, and a type registered
    /// directly.
    fn varied_cluster() -> SimCluster {
        let cluster = SimCluster::new();
        let rc = Gvr::new("", "v1", "replicationcontrollers");
        let mut owner = object(NS, "owner");
        owner.rest.insert("spec".into(), json!({"replicas": 2}));
        let owner = cluster.create(&rc, owner).expect("owner");
        let mut pod = object(NS, "dependent");
        pod.metadata.owner_references = vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ReplicationController".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }];
        pod.metadata.finalizers = vec!["example.com/keep".into()];
        cluster.create(&pods(), pod).expect("dependent");
        let foreground = DeleteOptions {
            propagation_policy: Some(PropagationPolicy::Foreground),
            ..Default::default()
        };
        cluster
            .delete_object(&rc, NS, "owner", &foreground)
            .expect("delete owner");
        cluster.create(&crds(), gadget_crd()).expect("CRD");
        cluster.create(&gadgets(), object(NS, "g")).expect("gadget");
        cluster.register(TypeDef::new("demo.example.com", "v1", "Widget", "widgets", true).custom());
        cluster
            .create(&Gvr::new("demo.example.com", "v1", "widgets"), object(NS, "w"))
            .expect("widget");
        cluster
    }

    #[test]
    fn a_restored_cluster_should_hold_the_same_types_objects_and_counter() {
        let cluster = varied_cluster();
        let restored = round_trip(&cluster);
        assert_eq!(restored.served_types().0, cluster.served_types().0);
        assert_eq!(everything(&restored), everything(&cluster));
        assert_eq!(restored.resource_version(), cluster.resource_version());
        let owner = restored
            .get_object(&Gvr::new("", "v1", "replicationcontrollers"), NS, "owner")
            .expect("owner kept");
        assert!(owner.metadata.deletion_timestamp.is_some());
        assert_eq!(owner.metadata.finalizers, ["foregroundDeletion"]);
        assert_eq!(owner.rest["spec"]["replicas"], 2);
    }

    #[test]
    fn a_restored_cluster_should_go_on_with_higher_resource_versions_and_crd_rules() {
        let cluster = varied_cluster();
        let restored = round_trip(&cluster);
        let before = cluster.resource_version();
        let created = restored.create(&pods(), object(NS, "new")).expect("create");
        assert_eq!(created.metadata.resource_version, (before + 1).to_string());
        restored
            .delete_object(&crds(), "", "gadgets.example.com", &DeleteOptions::default())
            .expect("delete the CRD");
        assert!(
            restored.type_def(&gadgets()).is_err(),
            "the restored CRD still rules its type"
        );
    }

    #[tokio::test]
    async fn a_watch_from_before_the_restore_should_be_gone_and_from_it_should_work() {
        let cluster = varied_cluster();
        let restored = round_trip(&cluster);
        let at = restored.resource_version();
        let err = restored
            .watch_objects(&pods(), &(at - 1).to_string())
            .err()
            .expect("410");
        assert_eq!(err.reason(), Some(StatusReason::Gone));
        let err = restored
            .watch_objects(&gadgets(), "1")
            .err()
            .expect("410 for a CRD's type too");
        assert_eq!(err.reason(), Some(StatusReason::Gone));
        let mut watch = restored
            .watch_objects(&pods(), &at.to_string())
            .expect("from the restore");
        let now = restored.watch_objects(&pods(), "").expect("from now");
        assert_eq!(now.initial_events, 1, "a watch from now lists the restored pod");
        restored.create(&pods(), object(NS, "new")).expect("create");
        let event = tokio::time::timeout(Duration::from_secs(5), watch.stream.next())
            .await
            .expect("an event within 5s; the restored hub is likely not publishing")
            .expect("open")
            .expect("no error");
        assert_eq!(event.object.metadata.name, "new");
    }

    #[test]
    fn managed_fields_should_survive_a_restore_and_keep_ruling_applies() {
        let cluster = SimCluster::new();
        let cms = Gvr::new("", "v1", "configmaps");
        let config = |value: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": value}});
        let apply = |cluster: &SimCluster, manager: &str, value: &str| {
            cluster
                .writes(false)
                .by(manager)
                .apply(&cms, NS, "c", &config(value), false)
        };
        let applied = apply(&cluster, "first", "1").expect("applies").object;
        cluster.create(&pods(), object(NS, "unmanaged")).expect("a pod");
        let restored = round_trip(&cluster);
        let uid = &applied.metadata.uid;
        assert_eq!(restored.managed_fields(uid), cluster.managed_fields(uid));
        assert!(restored.managed_fields(uid).is_some());
        let err = apply(&restored, "second", "2").expect_err("the first applier still owns data.a");
        assert_eq!(err.reason(), Some(StatusReason::Conflict));
    }

    #[test]
    fn a_fresh_cluster_should_still_be_watchable_from_its_first_resource_version() {
        let cluster = SimCluster::new();
        let at = cluster.resource_version().to_string();
        assert!(cluster.watch_objects(&pods(), &at).is_ok());
        assert!(cluster.watch_objects(&pods(), "0").is_ok());
    }

    #[test]
    fn the_crd_type_should_be_written_first_and_objects_in_stored_form() {
        let mut saved = Vec::new();
        varied_cluster().save_state(&mut saved).expect("save");
        let text = String::from_utf8(saved).expect("UTF-8");
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
        assert_eq!(lines[0]["format"], FORMAT);
        assert_eq!(lines[1]["resource"], CRD_RESOURCE);
        assert!(lines[1..]
            .iter()
            .all(|l| l["object"]["apiVersion"] == "" && l["object"]["kind"] == ""));
    }

    fn load_error(text: &str) -> StateError {
        SimCluster::load_state(text.as_bytes(), 10).err().expect("refused")
    }

    #[test]
    fn a_corrupt_state_should_be_refused_with_its_line() {
        assert!(matches!(load_error(""), StateError::Empty));
        assert!(matches!(load_error("{not json"), StateError::Malformed { line: 1, .. }));
        assert!(matches!(
            load_error(r#"{"format":"other"}"#),
            StateError::NotAState { .. }
        ));
        let header = |version: u32, objects: usize| {
            format!(r#"{{"format":"{FORMAT}","version":{version},"resourceVersion":5,"objects":{objects},"types":[]}}"#)
        };
        assert!(matches!(
            load_error(&header(2, 0)),
            StateError::UnsupportedVersion { version: 2 }
        ));
        let line = r#"{"group":"","resource":"pods","object":{"metadata":{"name":"p","resourceVersion":"3"}}}"#;
        assert!(matches!(
            load_error(&format!("{}\n{line}\n", header(1, 1))),
            StateError::UnknownType { line: 2, .. }
        ));
        let mut saved = Vec::new();
        varied_cluster().save_state(&mut saved).expect("save");
        let text = String::from_utf8(saved).expect("UTF-8");
        let without_last = &text[..=text.trim_end().rfind('\n').expect("more than one line")];
        assert!(matches!(load_error(without_last), StateError::CountMismatch { .. }));
        let last = text.lines().last().expect("a line");
        assert!(matches!(
            load_error(&format!("{text}{last}\n")),
            StateError::Taken { .. }
        ));
        let (first, rest) = text.split_once('\n').expect("a header line");
        let mut header: serde_json::Value = serde_json::from_str(first).expect("JSON");
        header["resourceVersion"] = json!(1);
        let older = format!("{header}\n{rest}");
        assert!(matches!(
            load_error(&older),
            StateError::BadResourceVersion {
                line: 2,
                counter: 1,
                ..
            }
        ));
    }

    #[test]
    fn save_state_file_should_replace_the_file_whole_and_leave_no_temporary() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("state.jsonl");
        std::fs::write(&path, "old").expect("an old file");
        let cluster = varied_cluster();
        let count = cluster.save_state_file(&path).expect("save");
        assert_eq!(count, cluster.object_count());
        assert!(!temporary_state_path(&path).exists());
        let restored = SimCluster::load_state(File::open(&path).expect("open"), 10).expect("load");
        assert_eq!(everything(&restored), everything(&cluster));
    }
}
