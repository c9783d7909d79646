"""Listing (selectors, pages, across namespaces) and watching (replayed from a resourceVersion,
and live while another thread writes)."""

import threading
import time

from kubernetes import client, watch


def make(core, namespace, name, labels):
    return core.create_namespaced_config_map(
        namespace,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": name}},
    )


def test_list_with_a_label_selector(core, namespace):
    for i in range(3):
        make(core, namespace, f"front-{i}", {"tier": "front"})
    make(core, namespace, "back-0", {"tier": "back"})
    listed = core.list_namespaced_config_map(namespace, label_selector="tier=front")
    assert sorted(o.metadata.name for o in listed.items) == ["front-0", "front-1", "front-2"]
    assert listed.metadata.resource_version
    assert [o.metadata.name for o in core.list_namespaced_config_map(namespace, label_selector="tier!=front").items] == [
        "back-0"
    ]


def test_list_across_namespaces_and_by_field(core, namespace):
    make(core, namespace, "marked", {"mark": namespace})
    everywhere = core.list_config_map_for_all_namespaces(label_selector=f"mark={namespace}")
    assert [(o.metadata.namespace, o.metadata.name) for o in everywhere.items] == [(namespace, "marked")]
    by_name = core.list_namespaced_config_map(namespace, field_selector="metadata.name=marked")
    assert [o.metadata.name for o in by_name.items] == ["marked"]
    names = [n.metadata.name for n in core.list_namespace().items]
    assert {"default", "kube-system", "kube-public", "kube-node-lease", namespace} <= set(names)


def test_list_in_pages(core, namespace):
    for i in range(5):
        make(core, namespace, f"page-{i}", {"paged": "yes"})
    seen = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(namespace, label_selector="paged=yes", limit=2, _continue=token)
        pages += 1
        assert len(page.items) <= 2
        seen.extend(o.metadata.name for o in page.items)
        token = page.metadata._continue
        if not token:
            break
        assert pages < 10, "the pages never ended"
    assert pages == 3
    assert sorted(seen) == [f"page-{i}" for i in range(5)]


def test_watch_replays_from_a_resource_version(core, namespace):
    start = core.list_namespaced_config_map(namespace).metadata.resource_version
    make(core, namespace, "watched", {"w": "1"})
    core.patch_namespaced_config_map("watched", namespace, {"data": {"k": "changed"}})
    core.delete_namespaced_config_map("watched", namespace)
    events = []
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_config_map,
        namespace,
        resource_version=start,
        timeout_seconds=30,
        _request_timeout=60,
    ):
        events.append((event["type"], event["object"].metadata.name, (event["object"].data or {}).get("k")))
        if event["type"] == "DELETED":
            w.stop()
    assert events == [
        ("ADDED", "watched", "watched"),
        ("MODIFIED", "watched", "changed"),
        ("DELETED", "watched", "changed"),
    ]


def test_watch_sees_live_changes(core, namespace):
    def writer():
        time.sleep(0.5)
        make(core, namespace, "live", {"live": "yes"})
        make(core, namespace, "other", {"live": "no"})
        core.patch_namespaced_config_map("live", namespace, {"metadata": {"labels": {"step": "2"}}})
        core.delete_namespaced_config_map("live", namespace)

    thread = threading.Thread(target=writer)
    events = []
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        namespace,
        label_selector="live=yes",
        timeout_seconds=30,
        _request_timeout=60,
    )
    thread.start()
    try:
        for event in stream:
            assert isinstance(event["object"], client.V1ConfigMap)
            events.append((event["type"], event["object"].metadata.name, event["object"].metadata.labels))
            if event["type"] == "DELETED":
                w.stop()
    finally:
        thread.join(timeout=30)
    assert [(t, n) for t, n, _ in events] == [("ADDED", "live"), ("MODIFIED", "live"), ("DELETED", "live")]
    assert events[1][2] == {"live": "yes", "step": "2"}
