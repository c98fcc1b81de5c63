"""Classic consumer groups, committed offsets, KIP-848 groups."""

SCHEMAS = """
FindCoordinatorRequest
  key string 0-3
  key_type int8 1+
  coordinator_keys []string 4+

FindCoordinatorResponse
  throttle_time_ms int32 1+
  error_code int16 0-3
  error_message string 1-3 null
  node_id int32 0-3
  host string 0-3
  port int32 0-3
  coordinators []Coordinator 4+
    key string 4+
    node_id int32 4+
    host string 4+
    port int32 4+
    error_code int16 4+
    error_message string 4+ null

JoinGroupRequest
  group_id string
  session_timeout_ms int32
  rebalance_timeout_ms int32 1+ =-1
  member_id string
  group_instance_id string 5+ null =null
  protocol_type string
  protocols []JoinGroupRequestProtocol
    name string
    metadata bytes
  reason string 8+ null =null

JoinGroupResponse
  throttle_time_ms int32 2+
  error_code int16
  generation_id int32 =-1
  protocol_type string 7+ null =null
  protocol_name string null=7+
  leader string
  skip_assignment bool 9+
  member_id string
  members []JoinGroupResponseMember
    member_id string
    group_instance_id string 5+ null =null
    metadata bytes

HeartbeatRequest
  group_id string
  generation_id int32
  member_id string
  group_instance_id string 3+ null =null

HeartbeatResponse
  throttle_time_ms int32 1+
  error_code int16

LeaveGroupRequest
  group_id string
  member_id string 0-2
  members []MemberIdentity 3+
    member_id string 3+
    group_instance_id string 3+ null =null
    reason string 5+ null =null

LeaveGroupResponse
  throttle_time_ms int32 1+
  error_code int16
  members []MemberResponse 3+
    member_id string 3+
    group_instance_id string 3+ null
    error_code int16 3+

SyncGroupRequest
  group_id string
  generation_id int32
  member_id string
  group_instance_id string 3+ null =null
  protocol_type string 5+ null =null
  protocol_name string 5+ null =null
  assignments []SyncGroupRequestAssignment
    member_id string
    assignment bytes

SyncGroupResponse
  throttle_time_ms int32 1+
  error_code int16
  protocol_type string 5+ null =null
  protocol_name string 5+ null =null
  assignment bytes

DescribeGroupsRequest
  groups []string
  include_authorized_operations bool 3+

DescribeGroupsResponse
  throttle_time_ms int32 1+
  groups []DescribedGroup
    error_code int16
    error_message string 6+ null =null
    group_id string
    group_state string
    protocol_type string
    protocol_data string
    members []DescribedGroupMember
      member_id string
      group_instance_id string 4+ null =null
      client_id string
      client_host string
      member_metadata bytes
      member_assignment bytes
    authorized_operations bitfield 3+

ListGroupsRequest
  states_filter []string 4+
  types_filter []string 5+

ListGroupsResponse
  throttle_time_ms int32 1+
  error_code int16
  groups []ListedGroup
    group_id string
    protocol_type string
    group_state string 4+
    group_type string 5+

DeleteGroupsRequest
  groups_names []string

DeleteGroupsResponse
  throttle_time_ms int32
  results []DeletableGroupResult
    group_id string
    error_code int16

OffsetCommitRequest
  group_id string
  generation_id_or_member_epoch int32 1+ =-1
  member_id string 1+
  group_instance_id string 7+ null =null
  retention_time_ms int64 2-4 =-1
  topics []OffsetCommitRequestTopic
    name string 0-9
    topic_id uuid 10+
    partitions []OffsetCommitRequestPartition
      partition_index int32
      committed_offset int64
      committed_leader_epoch int32 6+ =-1
      commit_timestamp int64 1 =-1
      committed_metadata string null

OffsetCommitResponse
  throttle_time_ms int32 3+
  topics []OffsetCommitResponseTopic
    name string 0-9
    topic_id uuid 10+
    partitions []OffsetCommitResponsePartition
      partition_index int32
      error_code int16

OffsetFetchRequest
  group_id string 0-7
  topics []OffsetFetchRequestTopic 0-7 null=2-7
    name string 0-7
    partition_indexes []int32 0-7
  groups []OffsetFetchRequestGroup 8+
    group_id string 8+
    member_id string 9+ null =null
    member_epoch int32 9+ =-1
    topics []OffsetFetchRequestTopics 8+ null
      name string 8-9
      topic_id uuid 10+
      partition_indexes []int32 8+
  require_stable bool 7+

OffsetFetchResponse
  throttle_time_ms int32 3+
  topics []OffsetFetchResponseTopic 0-7
    name string 0-7
    partitions []OffsetFetchResponsePartition 0-7
      partition_index int32 0-7
      committed_offset int64 0-7
      committed_leader_epoch int32 5-7 =-1
      metadata string 0-7 null
      error_code int16 0-7
  error_code int16 2-7
  groups []OffsetFetchResponseGroup 8+
    group_id string 8+
    topics []OffsetFetchResponseTopics 8+
      name string 8-9
      topic_id uuid 10+
      partitions []OffsetFetchResponsePartitions 8+
        partition_index int32 8+
        committed_offset int64 8+
        committed_leader_epoch int32 8+ =-1
        metadata string 8+ null
        error_code int16 8+
    error_code int16 8+

OffsetDeleteRequest
  group_id string
  topics []OffsetDeleteRequestTopic
    name string
    partitions []OffsetDeleteRequestPartition
      partition_index int32

OffsetDeleteResponse
  error_code int16
  throttle_time_ms int32
  topics []OffsetDeleteResponseTopic
    name string
    partitions []OffsetDeleteResponsePartition
      partition_index int32
      error_code int16

ConsumerGroupHeartbeatRequest
  group_id string
  member_id string
  member_epoch int32
  instance_id string null =null
  rack_id string null =null
  rebalance_timeout_ms int32 =-1
  subscribed_topic_names []string null =null
  subscribed_topic_regex string 1+ null =null
  server_assignor string null =null
  topic_partitions []TopicPartitions null =null
    topic_id uuid
    partitions []int32

ConsumerGroupHeartbeatResponse
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

ConsumerGroupDescribeRequest
  group_ids []string
  include_authorized_operations bool

ConsumerGroupDescribeResponse
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
      instance_id string null =null
      rack_id string null =null
      member_epoch int32
      client_id string
      client_host string
      subscribed_topic_names []string
      subscribed_topic_regex string null =null
      assignment Assignment
        topic_partitions []TopicPartitions
          topic_id uuid
          topic_name string
          partitions []int32
      target_assignment Assignment
      member_type int8 1+ =-1
    authorized_operations int32 =-2147483648

ConsumerProtocolSubscription data 0-3
  topics []string
  user_data bytes null =null
  owned_partitions []TopicPartition 1+
    topic string 1+
    partitions []int32 1+
  generation_id int32 2+ =-1
  rack_id string 3+ null =null

ConsumerProtocolAssignment data 0-3
  assigned_partitions []TopicPartition
    topic string
    partitions []int32
  user_data bytes null =null
"""
