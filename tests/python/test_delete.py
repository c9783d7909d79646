"""Deleting with each propagation policy, and the cascades `kube-gc run` carries out on a
Deployment -> ReplicaSet -> Pod tree built by hand (no controllers run). Also what a DELETE
answers, and a namespace held in Terminating by a finalizer."""

from kubernetes import client

from support import deployment_tree, eventually, not_found

HOLD = "example.com/hold"
MERGE = "application/merge-patch+json"


def test_delete_pod_returns_the_pod(core, namespace):
    created = core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "single"},
            "spec": {"containers": [{"name": "main", "image": "nginx:1"}]},
        },
    )
    deleted = core.delete_namespaced_pod("single", namespace)
    assert isinstance(deleted, client.V1Pod)
    assert deleted.metadata.name == "single"
    assert deleted.metadata.uid == created.metadata.uid
    assert deleted.spec.containers[0].image == "nginx:1"
    assert not_found(core.read_namespaced_pod, "single", namespace)


def as_json(api_client, answer):
    """A DELETE's answer as JSON: client versions decode it as a V1Status model or leave it a dict."""
    return api_client.sanitize_for_serialization(answer)


def test_delete_config_map_answers_success(api_client, core, namespace):
    created = core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "short-lived"}}
    )
    status = as_json(api_client, core.delete_namespaced_config_map("short-lived", namespace))
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == "short-lived"
    assert status["details"]["uid"] == created.metadata.uid
    assert not_found(core.read_namespaced_config_map, "short-lived", namespace)


def test_background_delete_cascades_to_replica_set_and_pods(core, apps, namespace):
    deployment, replica_set, pods = deployment_tree(apps, core, namespace, "bg")
    apps.delete_namespaced_deployment("bg", namespace, propagation_policy="Background")
    assert not_found(apps.read_namespaced_deployment, "bg", namespace)
    eventually(
        lambda: not_found(apps.read_namespaced_replica_set, replica_set.metadata.name, namespace),
        what="the ReplicaSet collected",
    )
    eventually(
        lambda: not core.list_namespaced_pod(namespace, label_selector="app=bg").items,
        what="the Pods collected",
    )


def test_foreground_delete_waits_for_dependents(api_client, core, apps, namespace):
    deployment, replica_set, pods = deployment_tree(apps, core, namespace, "fg", pod_finalizers=[HOLD])
    answer = apps.delete_namespaced_deployment(
        "fg", namespace, body=client.V1DeleteOptions(propagation_policy="Foreground")
    )
    # The Deployment is not gone yet, so the DELETE answers with it, marked.
    answer = as_json(api_client, answer)
    assert answer["kind"] == "Deployment"
    assert answer["metadata"]["uid"] == deployment.metadata.uid
    assert "foregroundDeletion" in answer["metadata"]["finalizers"]
    owner = apps.read_namespaced_deployment("fg", namespace)
    assert owner.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in owner.metadata.finalizers

    # The collector deletes the ReplicaSet in the foreground too, and then the Pods, which the
    # finalizer holds; everything above them waits.
    def pods_deleting():
        listed = core.list_namespaced_pod(namespace, label_selector="app=fg").items
        return len(listed) == len(pods) and all(p.metadata.deletion_timestamp for p in listed)

    eventually(pods_deleting, what="the Pods marked for deletion")
    middle = apps.read_namespaced_replica_set(replica_set.metadata.name, namespace)
    assert middle.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in middle.metadata.finalizers
    owner = apps.read_namespaced_deployment("fg", namespace)
    assert "foregroundDeletion" in owner.metadata.finalizers

    for pod in pods:
        core.patch_namespaced_pod(pod.metadata.name, namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    eventually(lambda: not core.list_namespaced_pod(namespace, label_selector="app=fg").items, what="the Pods gone")
    eventually(
        lambda: not_found(apps.read_namespaced_replica_set, replica_set.metadata.name, namespace),
        what="the ReplicaSet gone",
    )
    eventually(lambda: not_found(apps.read_namespaced_deployment, "fg", namespace), what="the Deployment gone")


def test_orphan_delete_leaves_dependents_without_the_owner(core, apps, namespace):
    deployment, replica_set, pods = deployment_tree(apps, core, namespace, "orph")
    apps.delete_namespaced_deployment("orph", namespace, propagation_policy="Orphan")
    eventually(lambda: not_found(apps.read_namespaced_deployment, "orph", namespace), what="the Deployment gone")

    orphan = apps.read_namespaced_replica_set(replica_set.metadata.name, namespace)
    assert orphan.metadata.uid == replica_set.metadata.uid
    assert orphan.metadata.deletion_timestamp is None
    assert not [r for r in orphan.metadata.owner_references or [] if r.uid == deployment.metadata.uid]
    listed = core.list_namespaced_pod(namespace, label_selector="app=orph").items
    assert sorted(p.metadata.uid for p in listed) == sorted(p.metadata.uid for p in pods)
    for pod in listed:
        assert [r.uid for r in pod.metadata.owner_references] == [replica_set.metadata.uid]


def test_namespace_terminates_once_a_held_object_is_released(core):
    name = "terminating-ns"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    core.create_namespaced_config_map(
        name,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": [HOLD]}},
    )
    core.create_namespaced_config_map(name, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "free"}})
    core.delete_namespace(name)

    def terminating():
        ns = core.read_namespace(name)
        return ns.status.phase == "Terminating" and ns.metadata.deletion_timestamp is not None

    eventually(terminating, what="the namespace Terminating")
    eventually(lambda: not_found(core.read_namespaced_config_map, "free", name), what="the free ConfigMap deleted")
    held = core.read_namespaced_config_map("held", name)
    assert held.metadata.deletion_timestamp is not None
    # An object only finalizers hold has no grace period left, as on a cluster.
    assert held.metadata.deletion_grace_period_seconds == 0
    assert core.read_namespace(name).status.phase == "Terminating"
    try:
        core.create_namespaced_config_map(name, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})
        raise AssertionError("a create in a terminating namespace succeeded")
    except client.ApiException as e:
        assert e.status == 403, e.body

    core.patch_namespaced_config_map("held", name, {"metadata": {"finalizers": None}}, _content_type=MERGE)
    eventually(lambda: not_found(core.read_namespace, name), what="the namespace gone")
    assert not_found(core.read_namespaced_config_map, "held", name)
