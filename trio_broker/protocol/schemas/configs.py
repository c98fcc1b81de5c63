"""Configs, config resources and client telemetry."""

SCHEMAS = """
DescribeConfigsRequest
  resources []DescribeConfigsResource
    resource_type int8
    resource_name string
    configuration_keys []string null
  include_synonyms bool 1+
  include_documentation bool 3+

DescribeConfigsResponse
  throttle_time_ms int32
  results []DescribeConfigsResult
    error_code int16
    error_message string null
    resource_type int8
    resource_name string
    configs []DescribeConfigsResourceResult
      name string
      value string null
      read_only bool
      config_source int8 1+ =-1
      is_default bool 0
      is_sensitive bool
      synonyms []DescribeConfigsSynonym 1+
        name string 1+
        value string 1+ null
        source int8 1+
      config_type int8 3+
      documentation string 3+ null

AlterConfigsRequest
  resources []AlterConfigsResource
    resource_type int8
    resource_name string
    configs []AlterableConfig
      name string
      value string null
  validate_only bool

AlterConfigsResponse
  throttle_time_ms int32
  responses []AlterConfigsResourceResponse
    error_code int16
    error_message string null
    resource_type int8
    resource_name string

IncrementalAlterConfigsRequest
  resources []AlterConfigsResource
    resource_type int8
    resource_name string
    configs []AlterableConfig
      name string
      config_operation int8
      value string null
  validate_only bool

IncrementalAlterConfigsResponse
  throttle_time_ms int32
  responses []AlterConfigsResourceResponse
    error_code int16
    error_message string null
    resource_type int8
    resource_name string

ListConfigResourcesRequest
  resource_types []int8 1+

ListConfigResourcesResponse
  throttle_time_ms int32
  error_code int16
  config_resources []ConfigResource
    resource_name string
    resource_type int8 1+ =16

GetTelemetrySubscriptionsRequest
  client_instance_id uuid

GetTelemetrySubscriptionsResponse
  throttle_time_ms int32
  error_code int16
  client_instance_id uuid
  subscription_id int32
  accepted_compression_types []int8
  push_interval_ms int32
  telemetry_max_bytes int32
  delta_temporality bool
  requested_metrics []string

PushTelemetryRequest
  client_instance_id uuid
  subscription_id int32
  terminating bool
  compression_type int8
  metrics bytes

PushTelemetryResponse
  throttle_time_ms int32
  error_code int16
"""
