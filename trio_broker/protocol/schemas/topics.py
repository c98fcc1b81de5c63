"""Topic, partition and log-directory administration."""

SCHEMAS = """
CreateTopicsRequest
  topics []CreatableTopic
    name string
    num_partitions int32
    replication_factor int16
    assignments []CreatableReplicaAssignment
      partition_index int32
      broker_ids []int32
    configs []CreatableTopicConfig
      name string
      value string null
  timeout_ms int32 =60000
  validate_only bool 1+

CreateTopicsResponse
  throttle_time_ms int32 2+
  topics []CreatableTopicResult
    name string
    topic_id uuid 7+
    error_code int16
    error_message string 1+ null
    topic_config_error_code int16 5+ tag=0
    num_partitions int32 5+ =-1
    replication_factor int16 5+ =-1
    configs []CreatableTopicConfigs 5+ null
      name string 5+
      value string 5+ null
      read_only bool 5+
      config_source int8 5+ =-1
      is_sensitive bool 5+

DeleteTopicsRequest
  topics []DeleteTopicState 6+
    name string 6+ null =null
    topic_id uuid 6+
  topic_names []string 0-5
  timeout_ms int32

DeleteTopicsResponse
  throttle_time_ms int32 1+
  responses []DeletableTopicResult
    name string null=6+
    topic_id uuid 6+
    error_code int16
    error_message string 5+ null =null

CreatePartitionsRequest
  topics []CreatePartitionsTopic
    name string
    count int32
    assignments []CreatePartitionsAssignment null =null
      broker_ids []int32
  timeout_ms int32
  validate_only bool

CreatePartitionsResponse
  throttle_time_ms int32
  results []CreatePartitionsTopicResult
    name string
    error_code int16
    error_message string null =null

ElectLeadersRequest
  election_type int8 1+
  topic_partitions []TopicPartitions null
    topic string
    partitions []int32
  timeout_ms int32 =60000

ElectLeadersResponse
  throttle_time_ms int32
  error_code int16 1+
  replica_election_results []ReplicaElectionResult
    topic string
    partition_result []PartitionResult
      partition_id int32
      error_code int16
      error_message string null

AlterPartitionReassignmentsRequest
  timeout_ms int32 =60000
  allow_replication_factor_change bool 1+ =true
  topics []ReassignableTopic
    name string
    partitions []ReassignablePartition
      partition_index int32
      replicas []int32 null =null

AlterPartitionReassignmentsResponse
  throttle_time_ms int32
  allow_replication_factor_change bool 1+ =true
  error_code int16
  error_message string null
  responses []ReassignableTopicResponse
    name string
    partitions []ReassignablePartitionResponse
      partition_index int32
      error_code int16
      error_message string null

ListPartitionReassignmentsRequest
  timeout_ms int32 =60000
  topics []ListPartitionReassignmentsTopics null =null
    name string
    partition_indexes []int32

ListPartitionReassignmentsResponse
  throttle_time_ms int32
  error_code int16
  error_message string null
  topics []OngoingTopicReassignment
    name string
    partitions []OngoingPartitionReassignment
      partition_index int32
      replicas []int32
      adding_replicas []int32
      removing_replicas []int32

AlterReplicaLogDirsRequest
  dirs []AlterReplicaLogDir
    path string
    topics []AlterReplicaLogDirTopic
      name string
      partitions []int32

AlterReplicaLogDirsResponse
  throttle_time_ms int32
  results []AlterReplicaLogDirTopicResult
    topic_name string
    partitions []AlterReplicaLogDirPartitionResult
      partition_index int32
      error_code int16

DescribeLogDirsRequest
  topics []DescribableLogDirTopic null
    topic string
    partitions []int32

DescribeLogDirsResponse
  throttle_time_ms int32
  error_code int16 3+
  results []DescribeLogDirsResult
    error_code int16
    log_dir string
    topics []DescribeLogDirsTopic
      name string
      partitions []DescribeLogDirsPartition
        partition_index int32
        partition_size int64
        offset_lag int64
        is_future_key bool
        # the project's own tagged field (Kafka has none here; its clients skip unknown tags):
        # the partition's cleanable dirty ratio, -1 when it is not compacted
        dirty_ratio float64 2+ tag=9000 =-1
    total_bytes int64 4+ =-1
    usable_bytes int64 4+ =-1
    is_cordoned bool 5+

DescribeProducersRequest
  topics []TopicRequest
    name string
    partition_indexes []int32

DescribeProducersResponse
  throttle_time_ms int32
  topics []TopicResponse
    name string
    partitions []PartitionResponse
      partition_index int32
      error_code int16
      error_message string null =null
      active_producers []ProducerState
        producer_id int64
        producer_epoch int32
        last_sequence int32 =-1
        last_timestamp int64 =-1
        coordinator_epoch int32
        current_txn_start_offset int64 =-1
"""
