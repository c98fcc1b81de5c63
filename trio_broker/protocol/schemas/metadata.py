"""Cluster metadata, API versions and features."""

SCHEMAS = """
MetadataRequest
  topics []MetadataRequestTopic null=1+
    topic_id uuid 10+
    name string null=10+
  allow_auto_topic_creation bool 4+ =true
  include_cluster_authorized_operations bool 8-10
  include_topic_authorized_operations bool 8+

# The authorized-operations fields of MetadataResponse and DescribeClusterResponse are named
# authorized_operations (the name this project's code and clients use), read as bit sets.
MetadataResponse
  throttle_time_ms int32 3+
  brokers []MetadataResponseBroker
    node_id int32
    host string
    port int32
    rack string 1+ null =null
  cluster_id string 2+ null =null
  controller_id int32 1+ =-1
  topics []MetadataResponseTopic
    error_code int16
    name string null=12+
    topic_id uuid 10+
    is_internal bool 1+
    partitions []MetadataResponsePartition
      error_code int16
      partition_index int32
      leader_id int32
      leader_epoch int32 7+ =-1
      replica_nodes []int32
      isr_nodes []int32
      offline_replicas []int32 5+
    authorized_operations bitfield 8+
  authorized_operations bitfield 8-10
  error_code int16 13+

ApiVersionsRequest
  client_software_name string 3+
  client_software_version string 3+

ApiVersionsResponse
  error_code int16
  api_keys []ApiVersion
    api_key int16
    min_version int16
    max_version int16
  throttle_time_ms int32 1+
  supported_features []SupportedFeatureKey 3+ tag=0
    name string 3+
    min_version int16 3+
    max_version int16 3+
  finalized_features_epoch int64 3+ tag=1 =-1
  finalized_features []FinalizedFeatureKey 3+ tag=2
    name string 3+
    max_version_level int16 3+
    min_version_level int16 3+
  zk_migration_ready bool 3+ tag=3

DescribeClusterRequest
  include_cluster_authorized_operations bool
  endpoint_type int8 1+ =1
  include_fenced_brokers bool 2+

DescribeClusterResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  endpoint_type int8 1+ =1
  cluster_id string
  controller_id int32 =-1
  brokers []DescribeClusterBroker
    broker_id int32
    host string
    port int32
    rack string null =null
    is_fenced bool 2+
  authorized_operations bitfield

DescribeTopicPartitionsRequest
  topics []TopicRequest
    name string
  response_partition_limit int32 =2000
  cursor Cursor null =null
    topic_name string
    partition_index int32

DescribeTopicPartitionsResponse
  throttle_time_ms int32
  topics []DescribeTopicPartitionsResponseTopic
    error_code int16
    name string null
    topic_id uuid
    is_internal bool
    partitions []DescribeTopicPartitionsResponsePartition
      error_code int16
      partition_index int32
      leader_id int32
      leader_epoch int32 =-1
      replica_nodes []int32
      isr_nodes []int32
      eligible_leader_replicas []int32 null =null
      last_known_elr []int32 null =null
      offline_replicas []int32
    topic_authorized_operations int32 =-2147483648
  next_cursor Cursor null =null
    topic_name string
    partition_index int32

DescribeQuorumRequest
  topics []TopicData
    topic_name string
    partitions []PartitionData
      partition_index int32

DescribeQuorumResponse
  error_code int16
  error_message string 2+ null
  topics []TopicData
    topic_name string
    partitions []PartitionData
      partition_index int32
      error_code int16
      error_message string 2+ null
      leader_id int32
      leader_epoch int32
      high_watermark int64
      current_voters []ReplicaState
        replica_id int32
        replica_directory_id uuid 2+
        log_end_offset int64
        last_fetch_timestamp int64 1+ =-1
        last_caught_up_timestamp int64 1+ =-1
      observers []ReplicaState
  nodes []Node 2+
    node_id int32 2+
    listeners []Listener 2+
      name string 2+
      host string 2+
      port uint16 2+

UpdateFeaturesRequest
  timeout_ms int32 =60000
  feature_updates []FeatureUpdateKey
    feature string
    max_version_level int16
    allow_downgrade bool 0
    upgrade_type int8 1+ =1
  validate_only bool 1+

UpdateFeaturesResponse
  throttle_time_ms int32
  error_code int16
  error_message string null
  results []UpdatableFeatureResult 0-1
    feature string
    error_code int16
    error_message string null
"""
