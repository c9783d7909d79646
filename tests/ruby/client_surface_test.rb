# Ruby's kubeclient against the simulated API server: what it reads back is what a cluster gives it.
# kubeclient applies with a JSON body, watches through the legacy `/watch/` paths, and reaches
# the `scale` and `status` subresources as paths below the object.

require 'minitest/autorun'
require 'securerandom'
require 'kubeclient'

class ClientSurfaceTest < Minitest::Test
  def setup
    url = ENV.fetch('KUBE_GC_API')
    @core = Kubeclient::Client.new("#{url}/api", 'v1')
    @apps = Kubeclient::Client.new("#{url}/apis/apps", 'v1')
    @namespace = "ruby-surface-#{SecureRandom.hex(3)}"
    @core.create_namespace(Kubeclient::Resource.new(metadata: { name: @namespace }))
  end

  def teardown
    @core.delete_namespace(@namespace)
  end

  def deployment(name)
    labels = { app: name }
    {
      apiVersion: 'apps/v1', kind: 'Deployment',
      metadata: { name: name, namespace: @namespace },
      spec: {
        selector: { matchLabels: labels },
        template: { metadata: { labels: labels }, spec: { containers: [{ name: 'main', image: 'nginx:1.25' }] } }
      }
    }
  end

  def test_an_applied_deployment_reads_back_with_its_defaults_and_manager
    @apps.apply_entity('deployments', deployment('web'), field_manager: 'ruby')
    web = @apps.get_deployment('web', @namespace)
    assert_equal 1, web.spec.replicas
    assert_equal 'RollingUpdate', web.spec.strategy.type
    assert_equal 600, web.spec.progressDeadlineSeconds
    assert_equal 'ClusterFirst', web.spec.template.spec.dnsPolicy
    assert_equal 'IfNotPresent', web.spec.template.spec.containers[0].imagePullPolicy
    assert_equal ['ruby'], web.metadata.managedFields.map(&:manager)
  end

  def test_a_service_gets_a_cluster_ip_and_its_ports_defaults
    service = Kubeclient::Resource.new(
      metadata: { name: 'web', namespace: @namespace },
      spec: { selector: { app: 'web' }, ports: [{ port: 80 }] }
    )
    spec = @core.create_service(service).spec
    assert_equal 'ClusterIP', spec.type
    assert_match(/\A10\.\d+\.\d+\.\d+\z/, spec.clusterIP)
    assert_equal 'TCP', spec.ports[0].protocol
    assert_equal 80, spec.ports[0].targetPort
  end

  def test_the_scale_and_status_subresources
    @apps.apply_entity('deployments', deployment('web'), field_manager: 'ruby')
    scale = @apps.get_entity('deployments', 'web/scale', @namespace)
    assert_equal ['Scale', 1, 'app=web'], [scale.kind, scale.spec.replicas, scale.status.selector]
    scaled = @apps.patch_entity('deployments', 'web/scale', { spec: { replicas: 3 } }, 'merge-patch', @namespace)
    assert_equal 3, scaled.spec.replicas
    assert_equal 3, @apps.get_deployment('web', @namespace).spec.replicas
    status = { status: { replicas: 3, readyReplicas: 2 } }
    written = @apps.patch_entity('deployments', 'web/status', status, 'merge-patch', @namespace)
    assert_equal 2, written.status.readyReplicas
    assert_equal 3, written.spec.replicas
  end

  def test_a_watch_of_one_object_through_the_legacy_path
    created = @core.create_config_map(Kubeclient::Resource.new(metadata: { name: 'other', namespace: @namespace }))
    watcher = @core.watch_config_maps(namespace: @namespace, name: 'watched',
                                      resource_version: created.metadata.resourceVersion, timeout_seconds: 5)
    seen = []
    reader = Thread.new do
      watcher.each do |notice|
        seen << [notice.type, notice.object.metadata.name]
        break if notice.type == 'ADDED'
      end
    end
    @core.create_config_map(Kubeclient::Resource.new(metadata: { name: 'skipped', namespace: @namespace }))
    @core.create_config_map(Kubeclient::Resource.new(metadata: { name: 'watched', namespace: @namespace }))
    assert reader.join(10), 'the watch delivered nothing within 10s'
    watcher.finish
    assert_equal [%w[ADDED watched]], seen
  end
end
