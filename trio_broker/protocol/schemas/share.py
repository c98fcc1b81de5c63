"""Share groups (KIP-932, Kafka's queues): membership, describe, fetch and acknowledge.

Kafka 4.1 made version 1 the first stable version of each (version 0 was 4.0's early access and
is gone); Kafka 4.2 adds ShareFetch v2 and ShareAcknowledge v2 (KIP-1206 acquire modes, KIP-1222
renew acknowledgements).

The share group offset APIs (90-92) came with Kafka 4.1 at version 0; Kafka 4.2 adds
DescribeShareGroupOffsets v1, whose answer carries each share-partition's lag (KIP-1226).
"""

SCHEMAS = """
ShareGroupHeartbeatRequest
  group_id string
  member_id string
  member_epoch int32
  rack_id string null =null
  subscribed_topic_names []string null =null

ShareGroupHeartbeatResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  member_id string null =null
  member_epoch int32
  heartbeat_interval_ms int32
  assignment Assignment null =null
    topic_partitions []TopicPartitions
      topic_id uuid
      partitions []int32

ShareGroupDescribeRequest
  group_ids []string
  include_authorized_operations bool

ShareGroupDescribeResponse
  throttle_time_ms int32
  groups []DescribedGroup
    error_code int16
    error_message string null =null
    group_id string
    group_state string
    group_epoch int32
    assignment_epoch int32
    assignor_name string
    members []Member
      member_id string
      rack_id string null =null
      member_epoch int32
      client_id string
      client_host string
      subscribed_topic_names []string
      assignment Assignment
        topic_partitions []TopicPartitions
          topic_id uuid
          topic_name string
          partitions []int32
    authorized_operations int32 =-2147483648

ShareFetchRequest
  group_id string null =null
  member_id string null
  share_session_epoch int32
  max_wait_ms int32
  min_bytes int32
  max_bytes int32 =2147483647
  max_records int32
  batch_size int32
  share_acquire_mode int8 2+
  is_renew_ack bool 2+
  topics []FetchTopic
    topic_id uuid
    partitions []FetchPartition
      partition_index int32
      acknowledgement_batches []AcknowledgementBatch
        first_offset int64
        last_offset int64
        acknowledge_types []int8
  forgotten_topics_data []ForgottenTopic
    topic_id uuid
    partitions []int32

ShareFetchResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  acquisition_lock_timeout_ms int32
  responses []ShareFetchableTopicResponse
    topic_id uuid
    partitions []PartitionData
      partition_index int32
      error_code int16
      error_message string null =null
      acknowledge_error_code int16
      acknowledge_error_message string null =null
      current_leader LeaderIdAndEpoch
        leader_id int32
        leader_epoch int32
      records records null
      acquired_records []AcquiredRecords
        first_offset int64
        last_offset int64
        delivery_count int16
  node_endpoints []NodeEndpoint
    node_id int32
    host string
    port int32
    rack string null =null

ShareAcknowledgeRequest
  group_id string null =null
  member_id string null
  share_session_epoch int32
  is_renew_ack bool 2+
  topics []AcknowledgeTopic
    topic_id uuid
    partitions []AcknowledgePartition
      partition_index int32
      acknowledgement_batches []AcknowledgementBatch
        first_offset int64
        last_offset int64
        acknowledge_types []int8

ShareAcknowledgeResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  acquisition_lock_timeout_ms int32 2+
  responses []ShareAcknowledgeTopicResponse
    topic_id uuid
    partitions []PartitionData
      partition_index int32
      error_code int16
      error_message string null =null
      current_leader LeaderIdAndEpoch
        leader_id int32
        leader_epoch int32
  node_endpoints []NodeEndpoint
    node_id int32
    host string
    port int32
    rack string null =null

DescribeShareGroupOffsetsRequest
  groups []DescribeShareGroupOffsetsRequestGroup
    group_id string
    topics []DescribeShareGroupOffsetsRequestTopic null
      topic_name string
      partitions []int32

DescribeShareGroupOffsetsResponse
  throttle_time_ms int32
  groups []DescribeShareGroupOffsetsResponseGroup
    group_id string
    topics []DescribeShareGroupOffsetsResponseTopic
      topic_name string
      topic_id uuid
      partitions []DescribeShareGroupOffsetsResponsePartition
        partition_index int32
        start_offset int64
        leader_epoch int32
        lag int64 1+ =-1
        error_code int16
        error_message string null =null
    error_code int16
    error_message string null =null

AlterShareGroupOffsetsRequest
  group_id string
  topics []AlterShareGroupOffsetsRequestTopic
    topic_name string
    partitions []AlterShareGroupOffsetsRequestPartition
      partition_index int32
      start_offset int64

AlterShareGroupOffsetsResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  responses []AlterShareGroupOffsetsResponseTopic
    topic_name string
    topic_id uuid
    partitions []AlterShareGroupOffsetsResponsePartition
      partition_index int32
      error_code int16
      error_message string null =null

DeleteShareGroupOffsetsRequest
  group_id string
  topics []DeleteShareGroupOffsetsRequestTopic
    topic_name string

DeleteShareGroupOffsetsResponse
  throttle_time_ms int32
  error_code int16
  error_message string null =null
  responses []DeleteShareGroupOffsetsResponseTopic
    topic_name string
    topic_id uuid
    error_code int16
    error_message string null =null
"""
