//! The columns of a `Table` for each built-in type, as the API server's printers print them, so
//! that `kubectl get` (and `-o wide`, which adds the columns of priority 1) shows on the simulator
//! what it shows on a cluster. A type without a printer here (custom resources, CRDs, Roles) gets
//! the default table every server can print: the name and the creation time.
//!
//! # Invariants
//!
//! - Every row has exactly one cell per column, in the columns' order.
//! - A cell is computed from the object alone and the present time (ages and durations are
//!   printed as `kubectl` shows them: `45s`, `5m3s`, `3h`, `2d4h`), so a row never fails: a field
//!   missing or of another shape prints as the printers print an unset one (`0`, `<none>`, ``).

use super::subresource::label_selector;
use k8s_openapi::jiff::Timestamp;
use kube_gc::api::PartialObjectMeta;
use serde_json::{json, Map, Value};

/// A column: its name, its type (`string`, `integer`, `boolean`, `date`), and its priority (1 for
/// the columns only `-o wide` shows).
#[derive(Clone, Copy, Debug)]
pub(super) struct Column(&'static str, &'static str, u8);

impl Column {
    fn definition(self) -> Value {
        let Column(name, kind, priority) = self;
        let (format, description) = match name {
            "Name" => ("name", "Name must be unique within a namespace."),
            "Age" => ("", "CreationTimestamp is the time the object was created."),
            _ => ("", ""),
        };
        json!({"name": name, "type": kind, "format": format, "priority": priority, "description": description})
    }
}

const NAME: Column = Column("Name", "string", 0);
const AGE: Column = Column("Age", "string", 0);
const CONTAINERS: Column = Column("Containers", "string", 1);
const IMAGES: Column = Column("Images", "string", 1);
const SELECTOR: Column = Column("Selector", "string", 1);

/// A type's columns and how one object fills them.
#[derive(Clone, Copy)]
pub(super) struct Printer {
    columns: &'static [Column],
    cells: fn(&Row<'_>) -> Vec<Value>,
}

impl Printer {
    /// The printer of `group`/`resource`; the default one for a type without its own.
    pub(super) fn of(group: &str, resource: &str) -> Printer {
        PRINTERS
            .iter()
            .find(|(g, r, _)| *g == group && *r == resource)
            .map_or(DEFAULT, |(_, _, printer)| *printer)
    }

    /// The table's column definitions.
    pub(super) fn column_definitions(&self) -> Vec<Value> {
        self.columns.iter().map(|c| c.definition()).collect()
    }

    /// The cells of `obj`'s row, at `now`.
    pub(super) fn cells(&self, obj: &PartialObjectMeta, now: Timestamp) -> Vec<Value> {
        (self.cells)(&Row { obj, now })
    }
}

impl Default for Printer {
    fn default() -> Self {
        DEFAULT
    }
}

/// The table every server prints for any type.
const DEFAULT: Printer = Printer {
    columns: &[NAME, Column("Created At", "date", 0)],
    cells: |r| vec![r.name(), json!(r.obj.metadata.creation_timestamp)],
};

/// The printers, by group and resource. The core and `events.k8s.io` Events share one, as the
/// server prints both from the same internal type.
const PRINTERS: &[(&str, &str, Printer)] = &[
    ("", "pods", POD),
    (
        "",
        "configmaps",
        Printer {
            columns: &[NAME, Column("Data", "integer", 0), AGE],
            cells: |r| vec![r.name(), json!(r.len("data") + r.len("binaryData")), r.age()],
        },
    ),
    (
        "",
        "secrets",
        Printer {
            columns: &[NAME, Column("Type", "string", 0), Column("Data", "integer", 0), AGE],
            cells: |r| vec![r.name(), r.text("/type"), json!(r.len("data")), r.age()],
        },
    ),
    (
        "",
        "serviceaccounts",
        Printer {
            columns: &[NAME, Column("Secrets", "integer", 0), AGE],
            cells: |r| vec![r.name(), json!(r.len("secrets")), r.age()],
        },
    ),
    ("", "services", SERVICE),
    (
        "",
        "namespaces",
        Printer {
            columns: &[NAME, Column("Status", "string", 0), AGE],
            cells: |r| vec![r.name(), r.text("/status/phase"), r.age()],
        },
    ),
    ("", "nodes", NODE),
    ("", "persistentvolumes", PERSISTENT_VOLUME),
    ("", "replicationcontrollers", REPLICAS),
    ("", "events", EVENT),
    ("events.k8s.io", "events", EVENT),
    (
        "apps",
        "deployments",
        Printer {
            columns: &[
                NAME,
                Column("Ready", "string", 0),
                Column("Up-to-date", "integer", 0),
                Column("Available", "integer", 0),
                AGE,
                CONTAINERS,
                IMAGES,
                SELECTOR,
            ],
            cells: |r| {
                let ready = format!("{}/{}", r.int("/status/readyReplicas"), r.int("/spec/replicas"));
                let mut cells = vec![
                    r.name(),
                    json!(ready),
                    r.int("/status/updatedReplicas"),
                    r.int("/status/availableReplicas"),
                    r.age(),
                ];
                cells.extend(r.template_columns());
                cells
            },
        },
    ),
    ("apps", "replicasets", REPLICAS),
    (
        "apps",
        "statefulsets",
        Printer {
            columns: &[NAME, Column("Ready", "string", 0), AGE, CONTAINERS, IMAGES],
            cells: |r| {
                let ready = format!("{}/{}", r.int("/status/readyReplicas"), r.int("/spec/replicas"));
                let [containers, images, _] = r.template_columns();
                vec![r.name(), json!(ready), r.age(), containers, images]
            },
        },
    ),
    (
        "apps",
        "daemonsets",
        Printer {
            columns: &[
                NAME,
                Column("Desired", "integer", 0),
                Column("Current", "integer", 0),
                Column("Ready", "integer", 0),
                Column("Up-to-date", "integer", 0),
                Column("Available", "integer", 0),
                Column("Node Selector", "string", 0),
                AGE,
                CONTAINERS,
                IMAGES,
                SELECTOR,
            ],
            cells: |r| {
                let mut cells = vec![r.name()];
                for field in [
                    "desiredNumberScheduled",
                    "currentNumberScheduled",
                    "numberReady",
                    "updatedNumberScheduled",
                    "numberAvailable",
                ] {
                    cells.push(r.int(&format!("/status/{field}")));
                }
                cells.push(json!(labels(r.at("/spec/template/spec/nodeSelector"))));
                cells.push(r.age());
                cells.extend(r.template_columns());
                cells
            },
        },
    ),
    (
        "apps",
        "controllerrevisions",
        Printer {
            columns: &[
                NAME,
                Column("Controller", "string", 0),
                Column("Revision", "integer", 0),
                AGE,
            ],
            cells: |r| {
                let controller = r
                    .obj
                    .metadata
                    .owner_references
                    .iter()
                    .find(|o| o.controller == Some(true));
                let controller = controller.map_or("<none>".to_string(), |o| {
                    let group = o.api_version.rsplit_once('/').map_or("", |(g, _)| g);
                    let kind = o.kind.to_ascii_lowercase();
                    let qualified = if group.is_empty() {
                        kind
                    } else {
                        format!("{kind}.{group}")
                    };
                    format!("{qualified}/{}", o.name)
                });
                vec![r.name(), json!(controller), r.int("/revision"), r.age()]
            },
        },
    ),
    ("batch", "jobs", JOB),
    ("batch", "cronjobs", CRON_JOB),
    (
        "coordination.k8s.io",
        "leases",
        Printer {
            columns: &[NAME, Column("Holder", "string", 0), AGE],
            cells: |r| vec![r.name(), r.text("/spec/holderIdentity"), r.age()],
        },
    ),
    ("rbac.authorization.k8s.io", "rolebindings", BINDING),
    ("rbac.authorization.k8s.io", "clusterrolebindings", BINDING),
];

const POD: Printer = Printer {
    columns: &[
        NAME,
        Column("Ready", "string", 0),
        Column("Status", "string", 0),
        Column("Restarts", "string", 0),
        AGE,
        Column("IP", "string", 1),
        Column("Node", "string", 1),
        Column("Nominated Node", "string", 1),
        Column("Readiness Gates", "string", 1),
    ],
    cells: |r| {
        let statuses = r.list("/status/containerStatuses");
        let ready = statuses.iter().filter(|s| s.get("ready") == Some(&json!(true))).count();
        let restarts: i64 = statuses.iter().filter_map(|s| s.get("restartCount")?.as_i64()).sum();
        let total = r.list("/spec/containers").len();
        let gates = r.list("/spec/readinessGates");
        let gates = if gates.is_empty() {
            "<none>".to_string()
        } else {
            let conditions = r.list("/status/conditions");
            let met = gates
                .iter()
                .filter(|g| {
                    conditions
                        .iter()
                        .any(|c| c.get("type") == g.get("conditionType") && c.get("status") == Some(&json!("True")))
                })
                .count();
            format!("{met}/{}", gates.len())
        };
        vec![
            r.name(),
            json!(format!("{ready}/{total}")),
            json!(pod_status(r)),
            json!(restarts.to_string()),
            r.age(),
            r.or_none("/status/podIP"),
            r.or_none("/spec/nodeName"),
            r.or_none("/status/nominatedNodeName"),
            json!(gates),
        ]
    },
};

/// A pod's STATUS: its reason or phase, overridden by a container's waiting or terminated reason,
/// and `Terminating` once it is being deleted.
fn pod_status(r: &Row<'_>) -> String {
    let mut status = match r.str("/status/reason") {
        "" => r.str("/status/phase").to_string(),
        reason => reason.to_string(),
    };
    for container in r.list("/status/containerStatuses") {
        let reason = |state: &str| {
            container
                .pointer(&format!("/state/{state}/reason"))
                .and_then(Value::as_str)
        };
        if let Some(reason) = reason("waiting")
            .or_else(|| reason("terminated"))
            .filter(|r| !r.is_empty())
        {
            status = reason.to_string();
        }
    }
    if r.obj.metadata.deletion_timestamp.is_some() && status != "NodeLost" {
        status = "Terminating".to_string();
    }
    status
}

/// ReplicaSets and ReplicationControllers.
const REPLICAS: Printer = Printer {
    columns: &[
        NAME,
        Column("Desired", "integer", 0),
        Column("Current", "integer", 0),
        Column("Ready", "integer", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |r| {
        let mut cells = vec![
            r.name(),
            r.int("/spec/replicas"),
            r.int("/status/replicas"),
            r.int("/status/readyReplicas"),
            r.age(),
        ];
        cells.extend(r.template_columns());
        cells
    },
};

const SERVICE: Printer = Printer {
    columns: &[
        NAME,
        Column("Type", "string", 0),
        Column("Cluster-IP", "string", 0),
        Column("External-IP", "string", 0),
        Column("Port(s)", "string", 0),
        AGE,
        SELECTOR,
    ],
    cells: |r| {
        let kind = r.str("/spec/type");
        let mut external: Vec<String> = r.strings("/spec/externalIPs");
        let external = match kind {
            "ExternalName" => r.str("/spec/externalName").to_string(),
            "LoadBalancer" => {
                let ingress = r.list("/status/loadBalancer/ingress");
                let mut seen: Vec<String> = ingress
                    .iter()
                    .filter_map(|i| i.get("ip").or_else(|| i.get("hostname"))?.as_str().map(str::to_string))
                    .collect();
                seen.append(&mut external);
                if seen.is_empty() {
                    "<pending>".to_string()
                } else {
                    seen.join(",")
                }
            }
            _ if external.is_empty() => "<none>".to_string(),
            _ => external.join(","),
        };
        let ports: Vec<String> = r
            .list("/spec/ports")
            .iter()
            .map(|p| {
                let number = p.get("port").map(Value::to_string).unwrap_or_default();
                let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                match p.get("nodePort").and_then(Value::as_i64).filter(|&n| n > 0) {
                    Some(node_port) => format!("{number}:{node_port}/{protocol}"),
                    None => format!("{number}/{protocol}"),
                }
            })
            .collect();
        let ports = if ports.is_empty() {
            "<none>".to_string()
        } else {
            ports.join(",")
        };
        vec![
            r.name(),
            json!(kind),
            r.or_none("/spec/clusterIP"),
            json!(external),
            json!(ports),
            r.age(),
            json!(labels(r.at("/spec/selector"))),
        ]
    },
};

const NODE: Printer = Printer {
    columns: &[
        NAME,
        Column("Status", "string", 0),
        Column("Roles", "string", 0),
        AGE,
        Column("Version", "string", 0),
        Column("Internal-IP", "string", 1),
        Column("External-IP", "string", 1),
        Column("OS-Image", "string", 1),
        Column("Kernel-Version", "string", 1),
        Column("Container-Runtime", "string", 1),
    ],
    cells: |r| {
        let ready = r
            .list("/status/conditions")
            .into_iter()
            .find(|c| c.get("type") == Some(&json!("Ready")));
        let mut status = match ready.as_ref().and_then(|c| c.get("status")?.as_str()) {
            Some("True") => "Ready".to_string(),
            Some(_) => "NotReady".to_string(),
            None => "Unknown".to_string(),
        };
        if r.at("/spec/unschedulable") == Some(&json!(true)) {
            status.push_str(",SchedulingDisabled");
        }
        let roles: Vec<&str> = r
            .obj
            .metadata
            .labels
            .keys()
            .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
            .filter(|role| !role.is_empty())
            .collect();
        let roles = if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        };
        let address = |kind: &str| {
            let found = r
                .list("/status/addresses")
                .into_iter()
                .find(|a| a.get("type") == Some(&json!(kind)));
            json!(found
                .and_then(|a| a.get("address")?.as_str().map(str::to_string))
                .unwrap_or("<none>".into()))
        };
        vec![
            r.name(),
            json!(status),
            json!(roles),
            r.age(),
            r.text("/status/nodeInfo/kubeletVersion"),
            address("InternalIP"),
            address("ExternalIP"),
            r.text("/status/nodeInfo/osImage"),
            r.text("/status/nodeInfo/kernelVersion"),
            r.text("/status/nodeInfo/containerRuntimeVersion"),
        ]
    },
};

const PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        Column("Capacity", "string", 0),
        Column("Access Modes", "string", 0),
        Column("Reclaim Policy", "string", 0),
        Column("Status", "string", 0),
        Column("Claim", "string", 0),
        Column("StorageClass", "string", 0),
        Column("VolumeAttributesClass", "string", 0),
        Column("Reason", "string", 0),
        AGE,
        Column("VolumeMode", "string", 1),
    ],
    cells: |r| {
        let modes: Vec<&str> = r
            .strings("/spec/accessModes")
            .iter()
            .map(|m| match m.as_str() {
                "ReadWriteOnce" => "RWO",
                "ReadOnlyMany" => "ROX",
                "ReadWriteMany" => "RWX",
                "ReadWriteOncePod" => "RWOP",
                _ => "",
            })
            .filter(|m| !m.is_empty())
            .collect();
        let claim = match (r.str("/spec/claimRef/namespace"), r.str("/spec/claimRef/name")) {
            (_, "") => String::new(),
            (namespace, name) => format!("{namespace}/{name}"),
        };
        let class = |pointer: &str, unset: &str| match r.str(pointer) {
            "" => json!(unset),
            class => json!(class),
        };
        vec![
            r.name(),
            r.text("/spec/capacity/storage"),
            json!(modes.join(",")),
            r.text("/spec/persistentVolumeReclaimPolicy"),
            r.text("/status/phase"),
            json!(claim),
            class("/spec/storageClassName", ""),
            class("/spec/volumeAttributesClassName", "<unset>"),
            r.text("/status/reason"),
            r.age(),
            class("/spec/volumeMode", "<unset>"),
        ]
    },
};

/// Events of `v1` and of `events.k8s.io/v1`, each field read from whichever form the object has.
const EVENT: Printer = Printer {
    columns: &[
        Column("Last Seen", "string", 0),
        Column("Type", "string", 0),
        Column("Reason", "string", 0),
        Column("Object", "string", 0),
        Column("Subobject", "string", 1),
        Column("Source", "string", 1),
        Column("Message", "string", 0),
        Column("First Seen", "string", 1),
        Column("Count", "integer", 1),
        Column("Name", "string", 1),
    ],
    cells: |r| {
        let either = |a: &str, b: &str| match r.str(a) {
            "" => r.str(b).to_string(),
            found => found.to_string(),
        };
        let involved = if r.at("/involvedObject").is_some() {
            "/involvedObject"
        } else {
            "/regarding"
        };
        let object = format!(
            "{}/{}",
            r.str(&format!("{involved}/kind")).to_ascii_lowercase(),
            r.str(&format!("{involved}/name"))
        );
        let source = [
            either("/source/component", "/reportingController"),
            either("/source/host", "/deprecatedSource/host"),
        ];
        let source: Vec<&String> = source.iter().filter(|s| !s.is_empty()).collect();
        let last = either("/lastTimestamp", "/eventTime");
        let first = either("/firstTimestamp", "/eventTime");
        let since = |t: &str| json!(if t.is_empty() { r.age_text() } else { r.since(t) });
        let count = r
            .at("/count")
            .or_else(|| r.at("/deprecatedCount"))
            .cloned()
            .unwrap_or(json!(1));
        vec![
            since(&last),
            r.text("/type"),
            r.text("/reason"),
            json!(object),
            r.text(&format!("{involved}/fieldPath")),
            json!(source.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")),
            json!(either("/message", "/note")),
            since(&first),
            count,
            r.name(),
        ]
    },
};

const JOB: Printer = Printer {
    columns: &[
        NAME,
        Column("Status", "string", 0),
        Column("Completions", "string", 0),
        Column("Duration", "string", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |r| {
        let succeeded = r.int("/status/succeeded");
        let completions = match (r.at("/spec/completions"), r.int("/spec/parallelism").as_i64()) {
            (Some(completions), _) if !completions.is_null() => format!("{succeeded}/{completions}"),
            (_, Some(parallelism)) if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        };
        let duration = match (r.str("/status/startTime"), r.str("/status/completionTime")) {
            ("", _) => String::new(),
            (start, "") => r.since(start),
            (start, end) => match (parse_time(start), parse_time(end)) {
                (Some(start), Some(end)) => human_duration(end.as_second() - start.as_second()),
                _ => String::new(),
            },
        };
        let mut cells = vec![
            r.name(),
            json!(job_status(r)),
            json!(completions),
            json!(duration),
            r.age(),
        ];
        cells.extend(r.template_columns());
        cells
    },
};

/// A Job's STATUS: its final or suspending condition, else `Running`.
fn job_status(r: &Row<'_>) -> &'static str {
    let holds = |kind: &str| {
        r.list("/status/conditions")
            .iter()
            .any(|c| c.get("type") == Some(&json!(kind)) && c.get("status") == Some(&json!("True")))
    };
    [
        ("Failed", "Failed"),
        ("Complete", "Complete"),
        ("Suspended", "Suspended"),
        ("FailureTarget", "FailureTarget"),
        ("SuccessCriteriaMet", "SuccessCriteriaMet"),
    ]
    .into_iter()
    .find(|(condition, _)| holds(condition))
    .map_or("Running", |(_, status)| status)
}

const CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        Column("Schedule", "string", 0),
        Column("Timezone", "string", 0),
        Column("Suspend", "boolean", 0),
        Column("Active", "integer", 0),
        Column("Last Schedule", "string", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |r| {
        let last = match r.str("/status/lastScheduleTime") {
            "" => "<none>".to_string(),
            last => r.since(last),
        };
        let template = r.at("/spec/jobTemplate/spec");
        let mut cells = vec![
            r.name(),
            r.text("/spec/schedule"),
            r.or_none("/spec/timeZone"),
            json!(r.at("/spec/suspend") == Some(&json!(true))),
            json!(r.list("/status/active").len()),
            json!(last),
            r.age(),
        ];
        cells.extend(template_columns(template));
        cells
    },
};

const BINDING: Printer = Printer {
    columns: &[
        NAME,
        Column("Role", "string", 0),
        AGE,
        Column("Users", "string", 1),
        Column("Groups", "string", 1),
        Column("ServiceAccounts", "string", 1),
    ],
    cells: |r| {
        let subjects = r.list("/subjects");
        let of_kind = |kind: &str| -> Value {
            let names: Vec<String> = subjects
                .iter()
                .filter(|s| s.get("kind") == Some(&json!(kind)))
                .map(|s| {
                    let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                    match s.get("namespace").and_then(Value::as_str) {
                        Some(namespace) if kind == "ServiceAccount" => format!("{namespace}/{name}"),
                        _ => name.to_string(),
                    }
                })
                .collect();
            json!(names.join(", "))
        };
        let role = format!("{}/{}", r.str("/roleRef/kind"), r.str("/roleRef/name"));
        vec![
            r.name(),
            json!(role),
            r.age(),
            of_kind("User"),
            of_kind("Group"),
            of_kind("ServiceAccount"),
        ]
    },
};

/// An object being printed, at the time it is printed.
struct Row<'a> {
    obj: &'a PartialObjectMeta,
    now: Timestamp,
}

impl Row<'_> {
    fn name(&self) -> Value {
        json!(self.obj.metadata.name)
    }

    /// The field at the JSON pointer `pointer` below the object's top level.
    fn at(&self, pointer: &str) -> Option<&Value> {
        let (top, below) = pointer[1..]
            .split_once('/')
            .map_or((&pointer[1..], ""), |(t, b)| (t, b));
        let value = self.obj.rest.get(top)?;
        if below.is_empty() {
            Some(value)
        } else {
            value.pointer(&format!("/{below}"))
        }
    }

    fn str(&self, pointer: &str) -> &str {
        self.at(pointer).and_then(Value::as_str).unwrap_or_default()
    }

    fn text(&self, pointer: &str) -> Value {
        json!(self.str(pointer))
    }

    /// The field, or `<none>` when it is unset or empty.
    fn or_none(&self, pointer: &str) -> Value {
        match self.str(pointer) {
            "" => json!("<none>"),
            text => json!(text),
        }
    }

    /// An integer field; 0 when unset.
    fn int(&self, pointer: &str) -> Value {
        json!(self.at(pointer).and_then(Value::as_i64).unwrap_or(0))
    }

    fn list(&self, pointer: &str) -> Vec<Value> {
        self.at(pointer).and_then(Value::as_array).cloned().unwrap_or_default()
    }

    fn strings(&self, pointer: &str) -> Vec<String> {
        self.list(pointer)
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    /// How many entries the top-level map or list `key` has.
    fn len(&self, key: &str) -> usize {
        match self.obj.rest.get(key) {
            Some(Value::Object(map)) => map.len(),
            Some(Value::Array(items)) => items.len(),
            _ => 0,
        }
    }

    /// The time since `timestamp`, as `kubectl` prints an age; `<unknown>` when unreadable.
    fn since(&self, timestamp: &str) -> String {
        parse_time(timestamp).map_or("<unknown>".to_string(), |t| {
            human_duration(self.now.as_second() - t.as_second())
        })
    }

    fn age_text(&self) -> String {
        self.obj
            .metadata
            .creation_timestamp
            .as_deref()
            .map_or("<unknown>".to_string(), |t| self.since(t))
    }

    fn age(&self) -> Value {
        json!(self.age_text())
    }

    /// The Containers, Images and Selector columns of a workload with a pod template.
    fn template_columns(&self) -> [Value; 3] {
        template_columns(self.at("/spec"))
    }
}

/// The Containers, Images and Selector columns of the spec `spec` holding a pod template.
fn template_columns(spec: Option<&Value>) -> [Value; 3] {
    let containers: Vec<&Value> = spec
        .and_then(|s| s.pointer("/template/spec/containers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let joined = |key: &str| {
        let values: Vec<&str> = containers.iter().filter_map(|c| c.get(key)?.as_str()).collect();
        json!(values.join(","))
    };
    let selector = match spec.and_then(|s| s.get("selector")) {
        // A ReplicationController's selector is a plain map of labels.
        Some(Value::Object(map)) if !map.contains_key("matchLabels") && !map.contains_key("matchExpressions") => {
            labels(spec.and_then(|s| s.get("selector")))
        }
        Some(selector) => label_selector(selector),
        None => "<none>".to_string(),
    };
    [joined("name"), joined("image"), json!(selector)]
}

/// A map of labels as `a=b,c=d`, sorted by key; `<none>` when empty.
fn labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> = map
        .and_then(Value::as_object)
        .map(Map::iter)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

fn parse_time(timestamp: &str) -> Option<Timestamp> {
    timestamp.parse().ok()
}

/// A duration in seconds as `kubectl` prints an age: two units at most while they say something
/// (`5m3s`, `2d4h`), one once the larger unit is large enough (`45m`, `12d`).
pub(super) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let seconds = seconds.max(0);
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    let (days, years) = (hours / 24, hours / (24 * 365));
    let pair = |big: i64, big_unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{small}{small_unit}")
        }
    };
    match () {
        () if seconds < 120 => format!("{seconds}s"),
        () if minutes < 10 => pair(minutes, "m", seconds % 60, "s"),
        () if minutes < 180 => format!("{minutes}m"),
        () if hours < 8 => pair(hours, "h", minutes % 60, "m"),
        () if hours < 48 => format!("{hours}h"),
        () if hours < 24 * 8 => pair(days, "d", hours % 24, "h"),
        () if hours < 24 * 365 * 2 => format!("{days}d"),
        () if hours < 24 * 365 * 8 => pair(years, "y", days % 365, "d"),
        () => format!("{years}y"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().expect("time")
    }

    fn row(group: &str, resource: &str, body: Value) -> Vec<Value> {
        let mut body = body;
        body["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
        let obj: PartialObjectMeta = serde_json::from_value(body).expect("object");
        let printer = Printer::of(group, resource);
        let cells = printer.cells(&obj, now());
        assert_eq!(cells.len(), printer.columns.len(), "{resource}: one cell per column");
        cells
    }

    fn names(group: &str, resource: &str) -> Vec<(String, u8)> {
        Printer::of(group, resource)
            .columns
            .iter()
            .map(|Column(name, _, priority)| (name.to_uppercase(), *priority))
            .collect()
    }

    #[test]
    fn each_type_should_print_the_columns_a_cluster_prints() {
        let wide = |cols: &[&str], wide: &[&str]| -> Vec<(String, u8)> {
            let cols = cols.iter().map(|c| (c.to_string(), 0));
            cols.chain(wide.iter().map(|c| (c.to_string(), 1))).collect()
        };
        let cases = [
            (
                "",
                "pods",
                wide(
                    &["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
                    &["IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
                ),
            ),
            (
                "apps",
                "deployments",
                wide(
                    &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
                    &["CONTAINERS", "IMAGES", "SELECTOR"],
                ),
            ),
            (
                "apps",
                "replicasets",
                wide(
                    &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
                    &["CONTAINERS", "IMAGES", "SELECTOR"],
                ),
            ),
            (
                "apps",
                "statefulsets",
                wide(&["NAME", "READY", "AGE"], &["CONTAINERS", "IMAGES"]),
            ),
            (
                "",
                "services",
                wide(
                    &["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
                    &["SELECTOR"],
                ),
            ),
            ("", "configmaps", wide(&["NAME", "DATA", "AGE"], &[])),
            ("", "secrets", wide(&["NAME", "TYPE", "DATA", "AGE"], &[])),
            ("", "namespaces", wide(&["NAME", "STATUS", "AGE"], &[])),
            (
                "batch",
                "jobs",
                wide(
                    &["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
                    &["CONTAINERS", "IMAGES", "SELECTOR"],
                ),
            ),
            ("example.com", "widgets", wide(&["NAME", "CREATED AT"], &[])),
        ];
        for (group, resource, expected) in cases {
            assert_eq!(names(group, resource), expected, "{resource}");
        }
    }

    #[test]
    fn rows_should_print_the_objects_fields() {
        let template =
            json!({"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]}});
        let cases = [
            (
                "",
                "pods",
                json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1"},
                    "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                        {"ready": true, "restartCount": 2}, {"ready": false, "restartCount": 1,
                         "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                json!([
                    "p",
                    "1/2",
                    "CrashLoopBackOff",
                    "3",
                    "10m",
                    "10.0.0.5",
                    "n1",
                    "<none>",
                    "<none>"
                ]),
            ),
            (
                "apps",
                "deployments",
                json!({"metadata": {"name": "d"}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
                    "template": template}, "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}),
                json!(["d", "2/3", 3, 2, "10m", "a,b", "nginx,busybox", "app=d"]),
            ),
            (
                "",
                "services",
                json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.1",
                    "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
                    "selector": {"app": "s"}}}),
                json!([
                    "s",
                    "NodePort",
                    "10.96.0.1",
                    "<none>",
                    "80:30080/TCP,53/UDP",
                    "10m",
                    "app=s"
                ]),
            ),
            (
                "",
                "services",
                json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.2"}}),
                json!([
                    "lb",
                    "LoadBalancer",
                    "10.96.0.2",
                    "<pending>",
                    "<none>",
                    "10m",
                    "<none>"
                ]),
            ),
            (
                "",
                "secrets",
                json!({"metadata": {"name": "x"}, "type": "Opaque", "data": {"a": "", "b": ""}}),
                json!(["x", "Opaque", 2, "10m"]),
            ),
            (
                "batch",
                "jobs",
                json!({"metadata": {"name": "j"}, "spec": {"completions": 2, "template": template},
                    "status": {"succeeded": 2, "startTime": "2026-01-01T00:00:00Z",
                    "completionTime": "2026-01-01T00:00:42Z",
                    "conditions": [{"type": "Complete", "status": "True"}]}}),
                json!(["j", "Complete", "2/2", "42s", "10m", "a,b", "nginx,busybox", "<none>"]),
            ),
            (
                "",
                "replicationcontrollers",
                json!({"metadata": {"name": "rc"}, "spec": {"replicas": 1, "selector": {"app": "rc"}, "template": template}}),
                json!(["rc", 1, 0, 0, "10m", "a,b", "nginx,busybox", "app=rc"]),
            ),
        ];
        for (group, resource, body, expected) in cases {
            assert_eq!(json!(row(group, resource, body)), expected, "{resource}");
        }
    }

    #[test]
    fn human_duration_should_print_ages_as_kubectl_does() {
        let cases = [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (10 * 3600, "10h"),
            (50 * 3600, "2d2h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400, "3y"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, printed) in cases {
            assert_eq!(human_duration(seconds), printed, "{seconds}s");
        }
    }
}
