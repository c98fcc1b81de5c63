"""Produce, fetch and offsets of the log."""

SCHEMAS = """
ProduceRequest
  transactional_id string 3+ null =null
  acks int16
  timeout_ms int32
  topic_data []TopicProduceData
    name string 0-12
    topic_id uuid 13+
    partition_data []PartitionProduceData
      index int32
      records records null

ProduceResponse
  responses []TopicProduceResponse
    name string 0-12
    topic_id uuid 13+
    partition_responses []PartitionProduceResponse
      index int32
      error_code int16
      base_offset int64
      log_append_time_ms int64 2+ =-1
      log_start_offset int64 5+ =-1
      record_errors []BatchIndexAndErrorMessage 8+
        batch_index int32 8+
        batch_index_error_message string 8+ null =null
      error_message string 8+ null =null
      current_leader LeaderIdAndEpoch 10+ tag=0
        leader_id int32 10+ =-1
        leader_epoch int32 10+ =-1
  throttle_time_ms int32 1+
  node_endpoints []NodeEndpoint 10+ tag=0
    node_id int32 10+
    host string 10+
    port int32 10+
    rack string 10+ null =null

FetchRequest
  cluster_id string 12+ null tag=0 =null
  replica_id int32 0-14 =-1
  replica_state ReplicaState 15+ tag=1
    replica_id int32 15+ =-1
    replica_epoch int64 15+ =-1
  max_wait_ms int32
  min_bytes int32
  max_bytes int32 3+ =2147483647
  isolation_level int8 4+
  session_id int32 7+
  session_epoch int32 7+ =-1
  topics []FetchTopic
    topic string 0-12
    topic_id uuid 13+
    partitions []FetchPartition
      partition int32
      current_leader_epoch int32 9+ =-1
      fetch_offset int64
      last_fetched_epoch int32 12+ =-1
      log_start_offset int64 5+ =-1
      partition_max_bytes int32
      replica_directory_id uuid 17+ tag=0
      high_watermark int64 18+ tag=1 =9223372036854775807
  forgotten_topics_data []ForgottenTopic 7+
    topic string 7-12
    topic_id uuid 13+
    partitions []int32 7+
  rack_id string 11+

FetchResponse
  throttle_time_ms int32 1+
  error_code int16 7+
  session_id int32 7+
  responses []FetchableTopicResponse
    topic string 0-12
    topic_id uuid 13+
    partitions []PartitionData
      partition_index int32
      error_code int16
      high_watermark int64
      last_stable_offset int64 4+ =-1
      log_start_offset int64 5+ =-1
      diverging_epoch EpochEndOffset 12+ tag=0
        epoch int32 12+ =-1
        end_offset int64 12+ =-1
      current_leader LeaderIdAndEpoch 12+ tag=1
        leader_id int32 12+ =-1
        leader_epoch int32 12+ =-1
      snapshot_id SnapshotId 12+ tag=2
        end_offset int64 =-1
        epoch int32 =-1
      aborted_transactions []AbortedTransaction 4+ null
        producer_id int64 4+
        first_offset int64 4+
      preferred_read_replica int32 11+ =-1
      records records null
  node_endpoints []NodeEndpoint 16+ tag=0
    node_id int32 16+
    host string 16+
    port int32 16+
    rack string 16+ null =null

ListOffsetsRequest
  replica_id int32 =-1
  isolation_level int8 2+
  topics []ListOffsetsTopic
    name string
    partitions []ListOffsetsPartition
      partition_index int32
      current_leader_epoch int32 4+ =-1
      timestamp int64
      max_num_offsets int32 0 =1
  timeout_ms int32 10+

ListOffsetsResponse
  throttle_time_ms int32 2+
  topics []ListOffsetsTopicResponse
    name string
    partitions []ListOffsetsPartitionResponse
      partition_index int32
      error_code int16
      old_style_offsets []int64 0
      timestamp int64 1+ =-1
      offset int64 1+ =-1
      leader_epoch int32 4+ =-1

DeleteRecordsRequest
  topics []DeleteRecordsTopic
    name string
    partitions []DeleteRecordsPartition
      partition_index int32
      offset int64
  timeout_ms int32

DeleteRecordsResponse
  throttle_time_ms int32
  topics []DeleteRecordsTopicResult
    name string
    partitions []DeleteRecordsPartitionResult
      partition_index int32
      low_watermark int64
      error_code int16

OffsetForLeaderEpochRequest
  replica_id int32 3+ =-2
  topics []OffsetForLeaderTopic
    topic string
    partitions []OffsetForLeaderPartition
      partition int32
      current_leader_epoch int32 2+ =-1
      leader_epoch int32

OffsetForLeaderEpochResponse
  throttle_time_ms int32 2+
  topics []OffsetForLeaderTopicResult
    topic string
    partitions []EpochEndOffset
      error_code int16
      partition int32
      leader_epoch int32 1+ =-1
      end_offset int64 =-1
"""
