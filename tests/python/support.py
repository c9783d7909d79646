"""Helpers the Python client tests share: bounded waits and the objects they build."""

import time

from kubernetes import client

# How long a started program may take to print its address and become ready.
STARTUP = 60
# How long a cascade may take between two processes on a loaded machine.
PATIENCE = 60


def eventually(predicate, timeout=PATIENCE, what=None, interval=0.1):
    """Polls `predicate` until it returns a truthy value, which it returns; fails after `timeout` s.

    An exception from `predicate` counts as "not yet" until the deadline, then is raised.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except Exception as e:  # noqa: BLE001 - reported at the deadline
            if time.monotonic() >= deadline:
                raise
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"waited {timeout} s for {what or getattr(predicate, '__name__', 'a condition')}; last: {last!r}"
            )
        time.sleep(interval)


def not_found(read, *args, **kwargs):
    """Whether `read(*args, **kwargs)` answers 404; any other error is raised."""
    try:
        read(*args, **kwargs)
    except client.ApiException as e:
        if e.status == 404:
            return True
        raise
    return False


def owner_reference(api_version, kind, obj, block_owner_deletion=True, controller=True):
    """An ownerReference (JSON) to the typed object `obj`, by default as its controller."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": obj.metadata.name,
        "uid": obj.metadata.uid,
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
    }


def pod_template(app):
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1"}]},
    }


def deployment_tree(apps, core, namespace, name, pods=2, pod_finalizers=()):
    """A Deployment, a ReplicaSet it controls, and `pods` Pods the ReplicaSet controls, built by
    hand (no controller runs); the Pods carry `pod_finalizers`. Returns the three as read back."""
    deployment = apps.create_namespaced_deployment(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": name}}, "template": pod_template(name)},
        },
    )
    replica_set = apps.create_namespaced_replica_set(
        namespace,
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name}-rs",
                "labels": {"app": name},
                "ownerReferences": [owner_reference("apps/v1", "Deployment", deployment)],
            },
            "spec": {"replicas": pods, "selector": {"matchLabels": {"app": name}}, "template": pod_template(name)},
        },
    )
    created_pods = [
        core.create_namespaced_pod(
            namespace,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-pod-{i}",
                    "labels": {"app": name},
                    "finalizers": list(pod_finalizers),
                    "ownerReferences": [owner_reference("apps/v1", "ReplicaSet", replica_set)],
                },
                "spec": {"containers": [{"name": "main", "image": "nginx:1"}]},
            },
        )
        for i in range(pods)
    ]
    return deployment, replica_set, created_pods
