"""Version choice and the ApiVersions exchange's fallbacks, on real response frames."""

from __future__ import annotations

import pytest

from trio_broker.client.core.errors import KafkaConnectionError, UnsupportedVersionError
from trio_broker.client.core.versions import (
    CLIENT_VERSIONS,
    ApiVersionsExchange,
    choose_version,
    parse_api_versions,
)
from trio_broker.protocol.api_keys import ApiKey, kafka_range
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.messages import (
    decode_request_header,
    encode_request,
    encode_response,
    make_request,
    make_response,
    response_type,
)


def api_versions_frame(version: int, versions: dict[int, tuple[int, int]],
                       error_code: int = 0, correlation_id: int = 1) -> bytes:
    """A response frame (size prefix stripped) in the ``version`` layout, as the broker's
    encoder writes it to a v3 request."""
    request = encode_request(ApiKey.ApiVersions, 3, correlation_id, "t", make_request(
        ApiKey.ApiVersions, 3, client_software_name="t", client_software_version="1"))
    header = decode_request_header(request[4:])
    entry = response_type(ApiKey.ApiVersions).ApiVersion
    body = make_response(ApiKey.ApiVersions, version, error_code=error_code, api_keys=[
        entry(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in versions.items()])
    return encode_response(header, body, version=version)[4:]


def test_every_client_version_is_one_the_protocol_layer_encodes() -> None:
    for key, ours in CLIENT_VERSIONS.items():
        theirs = kafka_range(key)  # every version the schemas cover
        assert theirs.min <= ours.min <= ours.max <= theirs.max, ApiKey(key).name


def test_the_highest_common_version_is_chosen() -> None:
    assert choose_version(ApiKey.Fetch, {ApiKey.Fetch: (0, 16)}, "b") == 12
    assert choose_version(ApiKey.Fetch, {ApiKey.Fetch: (0, 6)}, "b") == 6
    assert choose_version(ApiKey.Metadata, {ApiKey.Metadata: (0, 0)}, "b") == 0


def test_no_common_version_names_both_ranges() -> None:
    with pytest.raises(UnsupportedVersionError,
                       match=r"^the broker at h:1 speaks Fetch v13-16; this client needs v4-12$"):
        choose_version(ApiKey.Fetch, {ApiKey.Fetch: (13, 16)}, "the broker at h:1")
    with pytest.raises(UnsupportedVersionError, match="does not implement DeleteGroups"):
        choose_version(ApiKey.DeleteGroups, {}, "the broker at h:1")


def test_exchange_accepts_the_first_answer() -> None:
    exchange = ApiVersionsExchange("b")
    assert exchange.version == 3
    assert exchange.receive(api_versions_frame(3, {18: (0, 4), 3: (0, 12)})) == {
        18: (0, 4), 3: (0, 12)}


def test_unsupported_version_retries_at_the_version_the_broker_lists() -> None:
    exchange = ApiVersionsExchange("b")
    refusal = api_versions_frame(0, {18: (0, 2)}, ErrorCode.UNSUPPORTED_VERSION)
    assert exchange.receive(refusal) is None
    assert exchange.version == 2
    assert exchange.receive(api_versions_frame(2, {18: (0, 2)})) == {18: (0, 2)}


def test_unparseable_refusal_falls_back_to_v0_and_invalid_request_too() -> None:
    exchange = ApiVersionsExchange("b")
    assert exchange.receive(b"\0\0\0\1\0\x23garbage") is None  # UNSUPPORTED_VERSION, junk
    assert exchange.version == 0
    exchange = ApiVersionsExchange("b")
    assert exchange.receive(api_versions_frame(0, {}, ErrorCode.INVALID_REQUEST)) is None
    assert exchange.version == 0


def test_other_errors_and_endless_refusals_fail_the_connection() -> None:
    with pytest.raises(KafkaConnectionError, match="ApiVersions v3 to b failed with "
                                                   "CLUSTER_AUTHORIZATION_FAILED"):
        ApiVersionsExchange("b").receive(api_versions_frame(
            0, {}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    exchange = ApiVersionsExchange("b")
    refusal = api_versions_frame(0, {18: (0, 3)}, ErrorCode.UNSUPPORTED_VERSION)
    assert [exchange.receive(refusal) for _ in range(3)] == [None] * 3  # v2, v1, v0 asked
    with pytest.raises(KafkaConnectionError, match="ApiVersions v0 to b failed"):
        exchange.receive(refusal)
    assert parse_api_versions(b"\0", 0) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)
