"""Server-side apply: the dynamic client's `server_side_apply` and a raw YAML PATCH, with the
stored object, its managedFields and the 409 of a conflict checked as a client sees them."""

import json

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

APPLY_YAML = "application/apply-patch+yaml"


@pytest.fixture
def deployments(api_client):
    dynamic = DynamicClient(api_client)
    return dynamic, dynamic.resources.get(api_version="apps/v1", kind="Deployment")


def deployment(replicas, containers):
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": name, "image": "nginx"} for name in containers]},
            },
        },
    }


def apply(deployments, namespace, body, **options):
    dynamic, resource = deployments
    return dynamic.server_side_apply(resource, body=body, namespace=namespace, field_manager="pytest", **options)


def managers(entries):
    return [(entry.manager, entry.operation) for entry in entries]


def test_apply_creates_updates_and_prunes_as_its_manager(deployments, apps, namespace):
    created = apply(deployments, namespace, deployment(2, ["main", "sidecar"]))
    assert created.spec.replicas == 2
    entry = created.metadata.managedFields[0]
    assert (entry.manager, entry.operation, entry.apiVersion, entry.fieldsType) == (
        "pytest",
        "Apply",
        "apps/v1",
        "FieldsV1",
    )
    containers = entry.fieldsV1["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert set(containers.to_dict()) == {'k:{"name":"main"}', 'k:{"name":"sidecar"}'}

    apply(deployments, namespace, deployment(3, ["main"]))
    stored = apps.read_namespaced_deployment("web", namespace)
    assert stored.spec.replicas == 3
    assert [c.name for c in stored.spec.template.spec.containers] == ["main"]
    assert managers(stored.metadata.managed_fields) == [("pytest", "Apply")]

    dry = apply(deployments, namespace, deployment(7, ["main"]), dry_run="All")
    assert dry.spec.replicas == 7
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 3


def test_an_update_takes_a_field_and_an_apply_of_another_value_conflicts(deployments, apps, namespace):
    apply(deployments, namespace, deployment(2, ["main"]))
    # A strategic merge patch, recorded as the manager the client's User-Agent names.
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 5}})
    stored = apps.read_namespaced_deployment("web", namespace)
    assert managers(stored.metadata.managed_fields) == [("pytest", "Apply"), ("OpenAPI-Generator", "Update")]

    with pytest.raises(client.ApiException) as refused:
        apply(deployments, namespace, deployment(3, ["main"]))
    assert refused.value.status == 409
    status = json.loads(refused.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "OpenAPI-Generator" using apps/v1: .spec.replicas'
    )
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "OpenAPI-Generator" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 5

    forced = apply(deployments, namespace, deployment(3, ["main"]), force_conflicts=True)
    assert forced.spec.replicas == 3
    assert managers(forced.metadata.managedFields) == [("pytest", "Apply")]


def test_a_raw_yaml_apply_needs_a_field_manager(api_client, core, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps/settings"
    yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: '1'\n"

    def patch(query):
        """The status and JSON body of a PATCH of the YAML text as it is, with `query`."""
        method, url, headers, body, _ = api_client.param_serialize(
            "PATCH",
            path,
            query_params=query,
            header_params={"Content-Type": APPLY_YAML, "Accept": "application/json"},
            body=yaml,
        )
        response = api_client.call_api(method, url, header_params=headers, body=body)
        return response.status, json.loads(response.read())

    status, refused = patch([])
    assert (status, refused["reason"]) == (422, "Invalid")
    assert "fieldManager: Required value" in refused["message"]

    status, created = patch([("fieldManager", "raw")])
    assert status == 201
    assert created["data"] == {"a": "1"}
    assert [e["manager"] for e in created["metadata"]["managedFields"]] == ["raw"]
    stored = core.read_namespaced_config_map("settings", namespace)
    assert stored.data == {"a": "1"}
    assert stored.metadata.managed_fields[0].fields_v1 == {"f:data": {"f:a": {}}}
