"""What a real API server refuses, the simulated one refuses as the Python client sees a cluster
refuse it: an `ApiException` with the status code, the `Status` reason and message in its body,
and for a 422 each failure as a `details.causes` entry."""

import json

import pytest
from kubernetes import client

from support import pod_template


def refusal(call, *args, **kwargs):
    """The `ApiException` `call(*args, **kwargs)` raises, with its body decoded."""
    with pytest.raises(client.ApiException) as raised:
        call(*args, **kwargs)
    return raised.value, json.loads(raised.value.body)


def causes(status):
    return [(c["field"], c["reason"]) for c in status.get("details", {}).get("causes", [])]


def test_an_upper_case_deployment_name_is_invalid(apps, namespace):
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "Bad_Name"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod_template("web")},
    }
    error, status = refusal(apps.create_namespaced_deployment, namespace, body)
    assert (error.status, error.reason) == (422, "Unprocessable Entity")
    assert status["reason"] == "Invalid"
    assert status["message"].startswith(
        'Deployment.apps "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
    )
    assert causes(status) == [("metadata.name", "FieldValueInvalid")]


def test_annotations_over_256_kib_are_too_long(core, namespace):
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="notes", annotations={"note": "x" * (256 * 1024)}))
    error, status = refusal(core.create_namespaced_config_map, namespace, body)
    assert error.status == 422
    assert status["message"] == (
        'ConfigMap "notes" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'
    )
    assert causes(status) == [("metadata.annotations", "FieldValueTooLong")]


def test_a_core_event_cannot_own_anything(core, namespace):
    owner = client.V1OwnerReference(api_version="v1", kind="Event", name="ev", uid="ev-uid")
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owned", owner_references=[owner]))
    error, status = refusal(core.create_namespaced_config_map, namespace, body)
    assert error.status == 422
    assert status["message"].endswith("/v1, Kind=Event is disallowed from being an owner")
    assert causes(status) == [("metadata.ownerReferences", "FieldValueInvalid")]


def test_a_patch_to_a_bad_label_value_is_invalid_and_changes_nothing(core, namespace):
    core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="target")))
    patch = {"metadata": {"labels": {"app": "-web"}}}
    error, status = refusal(core.patch_namespaced_config_map, "target", namespace, patch)
    assert error.status == 422
    assert status["message"].startswith(
        'ConfigMap "target" is invalid: metadata.labels: Invalid value: "-web": a valid label must be an empty string'
    )
    assert not core.read_namespaced_config_map("target", namespace).metadata.labels


def test_an_object_over_etcds_limit_is_a_500_in_etcds_words(core, namespace):
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="huge"), data={"blob": "x" * (2 * 1024 * 1024)})
    error, status = refusal(core.create_namespaced_config_map, namespace, body)
    assert error.status == 500
    assert status["message"] == "etcdserver: request is too large"
    assert "reason" not in status
