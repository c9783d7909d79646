"""Creating objects: typed models, `create_from_yaml` / `create_from_dict`, a create-or-patch
"apply", a body without Content-Type, a dry run, and a namespace that does not exist."""

import json

import pytest
from kubernetes import client, utils

from support import not_found


def config_map(name, data, labels=None):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


def test_create_typed_config_map_reads_back(core, namespace):
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="settings", labels={"role": "settings"}),
        data={"a": "1", "b": "2"},
    )
    created = core.create_namespaced_config_map(namespace, body)
    assert created.metadata.uid
    assert created.metadata.resource_version
    assert created.metadata.namespace == namespace
    assert created.metadata.creation_timestamp is not None
    read = core.read_namespaced_config_map("settings", namespace)
    assert read.metadata.uid == created.metadata.uid
    assert read.data == {"a": "1", "b": "2"}
    assert read.metadata.labels == {"role": "settings"}


def test_create_from_yaml_creates_every_document(api_client, core, apps, namespace, tmp_path):
    manifest = tmp_path / "app.yaml"
    manifest.write_text(
        """\
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {greeting: hello}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: 'nginx:1'}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""
    )
    created = utils.create_from_yaml(api_client, str(manifest), namespace=namespace)
    kinds = [type(objects[0]).__name__ for objects in created]
    assert kinds == ["V1ConfigMap", "V1Deployment", "V1Service"]
    assert core.read_namespaced_config_map("web-config", namespace).data == {"greeting": "hello"}
    deployment = apps.read_namespaced_deployment("web", namespace)
    assert deployment.spec.replicas == 2
    assert deployment.spec.template.spec.containers[0].image == "nginx:1"
    assert core.read_namespaced_service("web", namespace).spec.ports[0].port == 80


def test_create_from_yaml_reports_an_existing_object(api_client, namespace):
    document = config_map("twice", {"a": "1"})
    utils.create_from_yaml(api_client, yaml_objects=[document], namespace=namespace)
    with pytest.raises(utils.FailToCreateError) as failure:
        utils.create_from_yaml(api_client, yaml_objects=[document], namespace=namespace)
    [error] = failure.value.api_exceptions
    assert error.status == 409
    assert json.loads(error.body)["reason"] == "AlreadyExists"


def test_create_from_dict_creates_the_items_of_a_list(api_client, core, namespace):
    data = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [config_map("first", {"n": "1"}), config_map("second", {"n": "2"})],
    }
    created = utils.create_from_dict(api_client, data, namespace=namespace)
    assert [o.metadata.name for o in created] == ["first", "second"]
    listed = core.list_namespaced_config_map(namespace)
    data_of = {o.metadata.name: o.data for o in listed.items}
    assert {name: data_of.get(name) for name in ("first", "second")} == {"first": {"n": "1"}, "second": {"n": "2"}}


def apply(core, namespace, body):
    """Creates `body`, or patches the object in place when it exists (a create-or-patch apply
    without server-side apply)."""
    try:
        return core.create_namespaced_config_map(namespace, body)
    except client.ApiException as e:
        if e.status != 409:
            raise
    return core.patch_namespaced_config_map(body["metadata"]["name"], namespace, body)


def test_apply_creates_then_patches_in_place(core, namespace):
    first = apply(core, namespace, config_map("applied", {"a": "1"}, {"v": "1"}))
    second = apply(core, namespace, config_map("applied", {"a": "2", "b": "3"}, {"v": "2"}))
    assert second.metadata.uid == first.metadata.uid
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    read = core.read_namespaced_config_map("applied", namespace)
    assert read.data == {"a": "2", "b": "3"}
    assert read.metadata.labels == {"v": "2"}


def test_create_without_content_type(api_client, core, namespace, monkeypatch):
    pool = api_client.rest_client.pool_manager
    sent = []
    request = pool.request

    def recording(method, url, **kwargs):
        sent.append(dict(kwargs.get("headers") or {}))
        return request(method, url, **kwargs)

    monkeypatch.setattr(pool, "request", recording)
    url = f"{api_client.configuration.host}/api/v1/namespaces/{namespace}/configmaps"
    # No Content-Type in the headers: the REST client sends the body as JSON and names no type.
    response = api_client.call_api(
        "POST", url, header_params={"Accept": "application/json"}, body=config_map("no-content-type", {"a": "1"})
    )
    response.read()
    assert [h for h in sent if "content-type" in {k.lower() for k in h}] == []
    assert response.status == 201, response.data
    assert json.loads(response.data)["metadata"]["name"] == "no-content-type"
    monkeypatch.undo()
    assert core.read_namespaced_config_map("no-content-type", namespace).data == {"a": "1"}


def test_dry_run_create_answers_without_creating(core, namespace):
    answer = core.create_namespaced_config_map(namespace, config_map("dry", {"a": "1"}), dry_run="All")
    assert answer.metadata.name == "dry"
    assert answer.data == {"a": "1"}
    assert not_found(core.read_namespaced_config_map, "dry", namespace)
    assert "dry" not in [o.metadata.name for o in core.list_namespaced_config_map(namespace).items]


def test_create_in_a_missing_namespace_is_404(core):
    with pytest.raises(client.ApiException) as failure:
        core.create_namespaced_config_map("no-such-namespace", config_map("orphan", {"a": "1"}))
    assert failure.value.status == 404
    status = json.loads(failure.value.body)
    assert status["kind"] == "Status"
    assert status["reason"] == "NotFound"
    assert "no-such-namespace" in status["message"]
