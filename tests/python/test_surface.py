"""What the typed client reads back as from a cluster: the built-in types' defaults, and the
`scale` and `status` subresources of a Deployment."""

from kubernetes import client


def deployment(name):
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(name="main", image="nginx")]),
            ),
        ),
    )


def test_a_deployment_reads_back_with_its_defaults(apps, namespace):
    apps.create_namespaced_deployment(namespace, deployment("web"))
    spec = apps.read_namespaced_deployment("web", namespace).spec
    assert spec.replicas == 1
    assert spec.strategy.type == "RollingUpdate"
    assert (spec.strategy.rolling_update.max_surge, spec.strategy.rolling_update.max_unavailable) == ("25%", "25%")
    assert (spec.revision_history_limit, spec.progress_deadline_seconds) == (10, 600)
    pod = spec.template.spec
    assert (pod.restart_policy, pod.dns_policy, pod.scheduler_name) == ("Always", "ClusterFirst", "default-scheduler")
    assert pod.termination_grace_period_seconds == 30
    container = pod.containers[0]
    assert container.image_pull_policy == "Always", "an image without a tag"
    assert container.termination_message_path == "/dev/termination-log"


def test_a_service_and_a_secret_read_back_with_theirs(core, namespace):
    service = client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=8080)]),
    )
    spec = core.create_namespaced_service(namespace, service).spec
    assert (spec.type, spec.session_affinity, spec.internal_traffic_policy) == ("ClusterIP", "None", "Cluster")
    assert spec.cluster_ip.startswith("10.") and spec.cluster_ips == [spec.cluster_ip]
    assert (spec.ip_families, spec.ip_family_policy) == (["IPv4"], "SingleStack")
    assert (spec.ports[0].protocol, spec.ports[0].target_port) == ("TCP", 8080)
    secret = core.create_namespaced_secret(namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="token")))
    assert secret.type == "Opaque"


def test_the_scale_subresource_reads_and_patches_the_replicas(apps, namespace):
    apps.create_namespaced_deployment(namespace, deployment("web"))
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert (scale.spec.replicas, scale.status.replicas, scale.status.selector) == (1, 0, "app=web")
    scaled = apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 3
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    scale.spec.replicas = 2
    assert apps.replace_namespaced_deployment_scale("web", namespace, scale).spec.replicas == 2


def test_the_status_subresource_writes_only_the_status(apps, namespace):
    apps.create_namespaced_deployment(namespace, deployment("web"))
    patched = apps.patch_namespaced_deployment_status(
        "web", namespace, {"spec": {"replicas": 7}, "status": {"replicas": 1, "readyReplicas": 1}}
    )
    assert (patched.status.replicas, patched.status.ready_replicas) == (1, 1)
    assert patched.spec.replicas == 1, "the spec is not written through status"
    web = apps.read_namespaced_deployment("web", namespace)
    web.status.replicas = 5
    web.spec.replicas = 2
    replaced = apps.replace_namespaced_deployment("web", namespace, web)
    assert (replaced.spec.replicas, replaced.status.replicas) == (2, 1), "the status is not written through the object"
    assert apps.read_namespaced_deployment_status("web", namespace).status.ready_replicas == 1
