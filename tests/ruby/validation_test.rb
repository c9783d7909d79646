# frozen_string_literal: true

# What a real API server refuses, the simulated one refuses as Ruby's kubeclient sees a cluster
# refuse it: a Kubeclient::HttpError with the status code and the Status message, whose body
# carries the reason and, for a 422, each failure as a details.causes entry.
#
# Run by tests/it/ruby_client.rs, which starts the server and names it in KUBE_GC_API.

require 'json'
require 'kubeclient'
require 'minitest/autorun'
require 'securerandom'

class ValidationTest < Minitest::Test
  API = ENV.fetch('KUBE_GC_API')

  def core
    @core ||= Kubeclient::Client.new("#{API}/api", 'v1')
  end

  def apps
    @apps ||= Kubeclient::Client.new("#{API}/apis/apps", 'v1')
  end

  # A fresh namespace for each test, deleted afterwards.
  def namespace
    @namespace ||= "ruby-validation-#{SecureRandom.hex(3)}".tap do |name|
      core.create_namespace(Kubeclient::Resource.new(metadata: { name: name }))
    end
  end

  def teardown
    core.delete_namespace(@namespace) if @namespace
  end

  def config_map(name, data: {}, **metadata)
    Kubeclient::Resource.new(metadata: { name: name, namespace: namespace, **metadata }, data: data)
  end

  # The error the block raises, and the Status in its body.
  def refusal(&block)
    error = assert_raises(Kubeclient::HttpError, &block)
    [error, JSON.parse(error.response.body)]
  end

  def causes(status)
    status.fetch('details', {}).fetch('causes', []).map { |c| [c['field'], c['reason']] }
  end

  def test_an_upper_case_deployment_name_is_invalid
    deployment = Kubeclient::Resource.new(metadata: { name: 'Bad_Name', namespace: namespace })
    error, status = refusal { apps.create_deployment(deployment) }
    assert_equal 422, error.error_code
    assert_equal 'Invalid', status['reason']
    assert error.message.start_with?(
      'Deployment.apps "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": ' \
      'a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters'
    ), error.message
    assert_equal [%w[metadata.name FieldValueInvalid]], causes(status)
  end

  def test_a_254_character_name_is_too_long
    error, = refusal { core.create_config_map(config_map('n' * 254)) }
    assert_equal 422, error.error_code
    assert error.message.end_with?(': must be no more than 253 characters'), error.message
  end

  def test_annotations_over_256_kib_are_too_long
    error, status = refusal { core.create_config_map(config_map('notes', annotations: { note: 'x' * (256 * 1024) })) }
    assert_equal 422, error.error_code
    assert_equal 'ConfigMap "notes" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
                 error.message
    assert_equal [%w[metadata.annotations FieldValueTooLong]], causes(status)
  end

  def test_a_core_event_cannot_own_anything
    owner = { apiVersion: 'v1', kind: 'Event', name: 'ev', uid: 'ev-uid' }
    error, status = refusal { core.create_config_map(config_map('owned', ownerReferences: [owner])) }
    assert_equal 422, error.error_code
    assert error.message.end_with?('/v1, Kind=Event is disallowed from being an owner'), error.message
    assert_equal [%w[metadata.ownerReferences FieldValueInvalid]], causes(status)
  end

  def test_a_merge_patch_to_a_bad_label_value_is_invalid_and_changes_nothing
    core.create_config_map(config_map('target'))
    error, = refusal { core.merge_patch_config_map('target', { metadata: { labels: { app: '-web' } } }, namespace) }
    assert_equal 422, error.error_code
    assert error.message.start_with?(
      'ConfigMap "target" is invalid: metadata.labels: Invalid value: "-web": a valid label must be an empty string'
    ), error.message
    assert_nil core.get_config_map('target', namespace).metadata.labels
  end

  # kubeclient sends an apply as `resource.to_json`, so the configuration is a plain Hash.
  def test_an_apply_with_a_bad_label_key_is_invalid
    applied = { apiVersion: 'v1', kind: 'ConfigMap',
                metadata: { name: 'applied', namespace: namespace, labels: { 'a/b/c': 'x' } } }
    error, = refusal { core.apply_config_map(applied, field_manager: 'ruby') }
    assert_equal 422, error.error_code
    assert_includes error.message, 'metadata.labels: Invalid value: "a/b/c": a qualified name must consist of'
  end

  def test_a_body_over_3_mib_is_too_large
    error, status = refusal { core.create_config_map(config_map('big', data: { k: 'x' * (3 * 1024 * 1024) })) }
    assert_equal 413, error.error_code
    assert_equal 'RequestEntityTooLarge', status['reason']
    assert_equal 'Request entity too large: limit is 3145728', error.message
  end
end
