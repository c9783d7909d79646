"""Patching: JSON merge patch, strategic merge patch (the client's default for a dict body) and
JSON patch, where they differ on the metadata lists the collector reads."""

from support import owner_reference

MERGE = "application/merge-patch+json"


def config_map(core, namespace, name, finalizers=(), owners=()):
    return core.create_namespaced_config_map(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "finalizers": list(finalizers), "ownerReferences": list(owners)},
            "data": {"a": "1", "b": "2"},
        },
    )


def owner(core, namespace, name):
    return core.create_namespaced_config_map(
        namespace, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    )


def release(core, namespace, name):
    core.patch_namespaced_config_map(name, namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE)


def test_merge_patch_sets_and_removes_keys(core, namespace):
    before = config_map(core, namespace, "merged")
    after = core.patch_namespaced_config_map(
        "merged", namespace, {"data": {"a": "10", "b": None, "c": "3"}}, _content_type=MERGE
    )
    assert after.data == {"a": "10", "c": "3"}
    assert int(after.metadata.resource_version) > int(before.metadata.resource_version)
    assert core.read_namespaced_config_map("merged", namespace).data == {"a": "10", "c": "3"}


def plain_reference(owner_config_map):
    return owner_reference("v1", "ConfigMap", owner_config_map, block_owner_deletion=False, controller=False)


def held_by_the_first_of_two_owners(core, namespace, name):
    """Two owner ConfigMaps, and ConfigMap `name` owned by the first and held by the finalizer
    `example.com/one`. Returns the owners and a metadata patch naming the second owner and the
    finalizer `example.com/two`."""
    first = owner(core, namespace, "owner-a")
    second = owner(core, namespace, "owner-b")
    config_map(core, namespace, name, finalizers=["example.com/one"], owners=[plain_reference(first)])
    return first, second, {"finalizers": ["example.com/two"], "ownerReferences": [plain_reference(second)]}


def test_merge_patch_replaces_metadata_lists(core, namespace):
    _, second, metadata = held_by_the_first_of_two_owners(core, namespace, "replaced")
    after = core.patch_namespaced_config_map("replaced", namespace, {"metadata": metadata}, _content_type=MERGE)
    assert after.metadata.finalizers == ["example.com/two"]
    assert [r.uid for r in after.metadata.owner_references] == [second.metadata.uid]
    release(core, namespace, "replaced")


def test_strategic_merge_patch_merges_metadata_lists(core, namespace):
    first, second, metadata = held_by_the_first_of_two_owners(core, namespace, "strategic")
    patch = {"metadata": metadata, "data": {"b": "20"}}
    # A dict body goes as a strategic merge patch unless told otherwise.
    after = core.patch_namespaced_config_map("strategic", namespace, patch)
    assert sorted(after.metadata.finalizers) == ["example.com/one", "example.com/two"]
    assert sorted(r.uid for r in after.metadata.owner_references) == sorted([first.metadata.uid, second.metadata.uid])
    assert after.data == {"a": "1", "b": "20"}
    # The $patch directive removes one owner by its UID.
    removal = {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": first.metadata.uid}]}}
    after = core.patch_namespaced_config_map("strategic", namespace, removal)
    assert [r.uid for r in after.metadata.owner_references] == [second.metadata.uid]
    release(core, namespace, "strategic")


def test_json_patch_applies_operations(core, namespace):
    config_map(core, namespace, "operations")
    ops = [
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "replace", "path": "/data/a", "value": "100"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}},
    ]
    after = core.patch_namespaced_config_map("operations", namespace, ops)
    assert after.data == {"a": "100"}
    assert after.metadata.labels == {"patched": "json"}
