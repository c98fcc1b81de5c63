"""SASL, ACLs, SCRAM credentials and quotas."""

SCHEMAS = """
SaslHandshakeRequest
  mechanism string

SaslHandshakeResponse
  error_code int16
  mechanisms []string

SaslAuthenticateRequest
  auth_bytes bytes

SaslAuthenticateResponse
  error_code int16
  error_message string null
  auth_bytes bytes
  session_lifetime_ms int64 1+

DescribeAclsRequest
  resource_type_filter int8
  resource_name_filter string null
  pattern_type_filter int8 1+ =3
  principal_filter string null
  host_filter string null
  operation int8
  permission_type int8

DescribeAclsResponse
  throttle_time_ms int32
  error_code int16
  error_message string null
  resources []DescribeAclsResource
    resource_type int8
    resource_name string
    pattern_type int8 1+ =3
    acls []AclDescription
      principal string
      host string
      operation int8
      permission_type int8

CreateAclsRequest
  creations []AclCreation
    resource_type int8
    resource_name string
    resource_pattern_type int8 1+ =3
    principal string
    host string
    operation int8
    permission_type int8

CreateAclsResponse
  throttle_time_ms int32
  results []AclCreationResult
    error_code int16
    error_message string null

DeleteAclsRequest
  filters []DeleteAclsFilter
    resource_type_filter int8
    resource_name_filter string null
    pattern_type_filter int8 1+ =3
    principal_filter string null
    host_filter string null
    operation int8
    permission_type int8

DeleteAclsResponse
  throttle_time_ms int32
  filter_results []DeleteAclsFilterResult
    error_code int16
    error_message string null
    matching_acls []DeleteAclsMatchingAcl
      error_code int16
      error_message string null
      resource_type int8
      resource_name string
      pattern_type int8 1+ =3
      principal string
      host string
      operation int8
      permission_type int8

DescribeUserScramCredentialsRequest
  users []UserName null
    name string

DescribeUserScramCredentialsResponse
  throttle_time_ms int32
  error_code int16
  error_message string null
  results []DescribeUserScramCredentialsResult
    user string
    error_code int16
    error_message string null
    credential_infos []CredentialInfo
      mechanism int8
      iterations int32

AlterUserScramCredentialsRequest
  deletions []ScramCredentialDeletion
    name string
    mechanism int8
  upsertions []ScramCredentialUpsertion
    name string
    mechanism int8
    iterations int32
    salt bytes
    salted_password bytes

AlterUserScramCredentialsResponse
  throttle_time_ms int32
  results []AlterUserScramCredentialsResult
    user string
    error_code int16
    error_message string null

DescribeClientQuotasRequest
  components []ComponentData
    entity_type string
    match_type int8
    match string null
  strict bool

DescribeClientQuotasResponse
  throttle_time_ms int32
  error_code int16
  error_message string null
  entries []EntryData null
    entity []EntityData
      entity_type string
      entity_name string null
    values []ValueData
      key string
      value float64

AlterClientQuotasRequest
  entries []EntryData
    entity []EntityData
      entity_type string
      entity_name string null
    ops []OpData
      key string
      value float64
      remove bool
  validate_only bool

AlterClientQuotasResponse
  throttle_time_ms int32
  entries []EntryData
    error_code int16
    error_message string null
    entity []EntityData
      entity_type string
      entity_name string null
"""
