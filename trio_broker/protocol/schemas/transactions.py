"""Producer ids and transactions."""

SCHEMAS = """
InitProducerIdRequest
  transactional_id string null
  transaction_timeout_ms int32
  producer_id int64 3+ =-1
  producer_epoch int16 3+ =-1

InitProducerIdResponse
  throttle_time_ms int32
  error_code int16
  producer_id int64 =-1
  producer_epoch int16

AddPartitionsToTxnRequest
  transactions []AddPartitionsToTxnTransaction 4+
    transactional_id string 4+
    producer_id int64 4+
    producer_epoch int16 4+
    verify_only bool 4+
    topics []AddPartitionsToTxnTopic 4+
      name string
      partitions []int32
  v3_and_below_transactional_id string 0-3
  v3_and_below_producer_id int64 0-3
  v3_and_below_producer_epoch int16 0-3
  v3_and_below_topics []AddPartitionsToTxnTopic 0-3

AddPartitionsToTxnResponse
  throttle_time_ms int32
  error_code int16 4+
  results_by_transaction []AddPartitionsToTxnResult 4+
    transactional_id string 4+
    topic_results []AddPartitionsToTxnTopicResult 4+
      name string
      results_by_partition []AddPartitionsToTxnPartitionResult
        partition_index int32
        partition_error_code int16
  results_by_topic_v3_and_below []AddPartitionsToTxnTopicResult 0-3

AddOffsetsToTxnRequest
  transactional_id string
  producer_id int64
  producer_epoch int16
  group_id string

AddOffsetsToTxnResponse
  throttle_time_ms int32
  error_code int16

EndTxnRequest
  transactional_id string
  producer_id int64
  producer_epoch int16
  committed bool

EndTxnResponse
  throttle_time_ms int32
  error_code int16
  producer_id int64 5+ =-1
  producer_epoch int16 5+ =-1

WriteTxnMarkersRequest
  markers []WritableTxnMarker
    producer_id int64
    producer_epoch int16
    transaction_result bool
    topics []WritableTxnMarkerTopic
      name string
      partition_indexes []int32
    coordinator_epoch int32

WriteTxnMarkersResponse
  markers []WritableTxnMarkerResult
    producer_id int64
    topics []WritableTxnMarkerTopicResult
      name string
      partitions []WritableTxnMarkerPartitionResult
        partition_index int32
        error_code int16

TxnOffsetCommitRequest
  transactional_id string
  group_id string
  producer_id int64
  producer_epoch int16
  generation_id int32 3+ =-1
  member_id string 3+
  group_instance_id string 3+ null =null
  topics []TxnOffsetCommitRequestTopic
    name string
    partitions []TxnOffsetCommitRequestPartition
      partition_index int32
      committed_offset int64
      committed_leader_epoch int32 2+ =-1
      committed_metadata string null

TxnOffsetCommitResponse
  throttle_time_ms int32
  topics []TxnOffsetCommitResponseTopic
    name string
    partitions []TxnOffsetCommitResponsePartition
      partition_index int32
      error_code int16

DescribeTransactionsRequest
  transactional_ids []string

DescribeTransactionsResponse
  throttle_time_ms int32
  transaction_states []TransactionState
    error_code int16
    transactional_id string
    transaction_state string
    transaction_timeout_ms int32
    transaction_start_time_ms int64
    producer_id int64
    producer_epoch int16
    topics []TopicData
      topic string
      partitions []int32

ListTransactionsRequest
  state_filters []string
  producer_id_filters []int64
  duration_filter int64 1+ =-1
  transactional_id_pattern string 2+ null =null

ListTransactionsResponse
  throttle_time_ms int32
  error_code int16
  unknown_state_filters []string
  transaction_states []TransactionState
    transactional_id string
    producer_id int64
    transaction_state string
"""
