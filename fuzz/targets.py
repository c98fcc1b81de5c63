"""The fuzz targets: one function per parser of bytes that come from outside the process.

Why these functions and not the parsers themselves: each target drives a parser the way the
broker (or the client, the console, the control endpoint, the config loader) drives it, and
swallows exactly the errors that path turns into a close, an error code or a 400. Any other
exception escaping a target is a finding: somewhere in the real path it would be a traceback
instead of an answer. The same functions run under atheris (``fuzz/run.py``) and, without
instrumentation, in the normal test suite (``tests/fuzz/test_corpus_replay.py``), which replays
every corpus file.
"""

from __future__ import annotations

import base64
import math
import struct
import zlib
from collections.abc import Callable
from urllib.parse import quote

from trio_broker.broker.config import ConfigError
from trio_broker.broker.config.broker import build_config
from trio_broker.broker.config.loader import parse_config_text
from trio_broker.broker.coordinator.share import RecordState, SharePartition
from trio_broker.broker.http.messages import parse_headers, parse_time, show
from trio_broker.broker.http.overview import _safe_next
from trio_broker.broker.http.topic_pages import _browse_query
from trio_broker.broker.http.web import int_or_none, parse_form
from trio_broker.broker.http.writes import parse_configs
from trio_broker.broker.security.credentials import CredentialStore
from trio_broker.broker.security.oauthbearer import OAuthSettings
from trio_broker.broker.security.sasl import SaslAuthenticator, SaslSettings
from trio_broker.broker.security.scram import make_credential
from trio_broker.protocol import crc
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey, is_flexible
from trio_broker.protocol.batch import iter_batches, validate_batch
from trio_broker.protocol.compression import Compression, decompress
from trio_broker.protocol.consumer_protocol import (
    PayloadError,
    decode_assignment,
    decode_subscription,
)
from trio_broker.protocol.conversion import (
    check_keys_for_compaction,
    legacy_to_batch,
    recompress_batch,
)
from trio_broker.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    RemoteProtocolError,
    UnsupportedCompressionError,
)
from trio_broker.protocol.framing import NEED_DATA, FrameDecoder
from trio_broker.protocol.legacy import entry_magic
from trio_broker.protocol.messages import RequestHeader, decode_request_body, decode_request_header
from trio_broker.protocol.records import build_batch, decode_batches, decode_records
from trio_broker.testing.control import apply_fault, apply_latency, parse_body
from trio_broker.testing.fault_state import Faults

Target = Callable[[bytes], None]

#: what a produce path answers with an error code (produce.py ``_append``)
RECORD_ERRORS = (CorruptRecordError, InvalidRecordError, RecordTooLargeError,
                 UnsupportedCompressionError)
#: Kafka's default max.message.bytes
MAX_MESSAGE_BYTES = 1_048_588
#: the bound the fuzzed decompressions get (the broker's own bounds are larger, and slower)
MAX_INFLATED_BYTES = 4 * 1024 * 1024
_I32 = struct.Struct(">i")
#: what one control body may queue through ``count`` (``fault_state.MAX_INJECTED``)
MAX_QUEUED_FAULTS = 10_000


# --- the Kafka wire: frames, request headers, request bodies ---------------------------------

def request_frames(data: bytes) -> None:
    """A connection's byte stream, fed in chunks, split into frames; each frame's header and
    body decoded as the request handler decodes them. The first byte picks the chunk size."""
    if not data:
        return
    chunk = 1 + data[0] % 64
    stream = data[1:]
    decoder = FrameDecoder(max_frame_bytes=64 * 1024)
    pos = 0
    try:
        while pos < len(stream):
            view = decoder.frame_view(16)
            if view is not None:  # the rest of a big frame, read into its own buffer
                n = min(len(view), chunk, len(stream) - pos)
                view[:n] = stream[pos:pos + n]
                decoder.received_into(n)
            else:
                n = min(chunk, len(stream) - pos)
                decoder.receive_data(stream[pos:pos + n])
            pos += n
            while (frame := decoder.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                header = decode_request_header(frame)
                if header.api_key == ApiKey.ApiVersions and header.api_version > 4:
                    continue  # answered with the v0 error reply, body unread (KIP-511)
                decode_request_body(header, frame)
    except RemoteProtocolError:
        pass


#: every (API key, version) the header decoder lets through to a body decode
REQUEST_VERSIONS = frozenset((int(key), version) for key, supported in SUPPORTED_VERSIONS.items()
                             for version in range(supported.min, supported.max + 1))


def request_body(data: bytes) -> None:
    """One request body of the (API key, version) named by the first two bytes, decoded with the
    compiled codec from the third byte on."""
    if len(data) < 2 or (data[0], data[1]) not in REQUEST_VERSIONS:
        return
    key, version = data[0], data[1]
    header = RequestHeader(key, version, 0, "fuzz", is_flexible(key, version), 2)
    try:
        decode_request_body(header, data)
    except RemoteProtocolError:
        pass


# --- record batches ----------------------------------------------------------------------------

def _fix_crcs(buf: bytearray) -> None:
    """Rewrite the CRC of every v2 batch and legacy message at the top level of ``buf``, so the
    fuzzer's mutations reach the checks behind the CRC."""
    pos = 0
    while len(buf) - pos >= 17:
        (size,) = _I32.unpack_from(buf, pos + 8)
        end = pos + 12 + size
        if size < 0 or end > len(buf):
            return
        magic = buf[pos + 16]
        if magic == 2 and size >= 9:
            struct.pack_into(">I", buf, pos + 17, crc.crc32c(bytes(buf[pos + 21:end])))
        elif magic in (0, 1) and size >= 5:
            struct.pack_into(">I", buf, pos + 12, zlib.crc32(bytes(buf[pos + 16:end])))
        pos = end


def _produce(records: bytes, target: Compression | None, compact: bool) -> None:
    """``apis/produce.py`` ``_append`` without the log: convert, validate, recompress, check
    keys."""
    if entry_magic(records) in (0, 1):
        converted = legacy_to_batch(records, target=target,
                                    max_uncompressed_bytes=MAX_INFLATED_BYTES)
        if converted is None:
            return
        records = converted
    header = validate_batch(records, max_message_bytes=MAX_MESSAGE_BYTES)
    if target is not None and header.compression != target:
        records = recompress_batch(records, target, max_uncompressed_bytes=MAX_INFLATED_BYTES)
        validate_batch(records, max_message_bytes=4 * MAX_MESSAGE_BYTES)
    if compact:
        check_keys_for_compaction(records, "fuzz-0", max_uncompressed_bytes=MAX_INFLATED_BYTES)


_TOPIC_CODECS = (None, Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                 Compression.ZSTD)


def record_batches(data: bytes) -> None:
    """Record batches of every magic and codec. The first byte picks the path: a produce
    (legacy conversion, validation, the topic's codec, a compacted topic's key check) with or
    without CRCs fixed up; a consumer's decode of fetched batches; one batch's records without
    the CRC check; a bare decompression."""
    if len(data) < 2:
        return
    mode, payload = data[0], data[1:]
    try:
        path = mode & 3
        if path == 0:
            buf = bytearray(payload)
            if mode & 4:
                _fix_crcs(buf)
            _produce(bytes(buf), _TOPIC_CODECS[(mode >> 3) % len(_TOPIC_CODECS)],
                     bool(mode & 0x80))
        elif path == 1:
            for _ in decode_batches(payload, max_uncompressed_bytes=MAX_INFLATED_BYTES):
                pass
        elif path == 2:
            decode_records(payload, check_crc=False, max_uncompressed_bytes=MAX_INFLATED_BYTES)
        else:
            decompress(mode >> 2 & 7, payload, max_output=MAX_INFLATED_BYTES)
    except RECORD_ERRORS:
        pass


# --- consumer protocol -------------------------------------------------------------------------

def consumer_protocol(data: bytes) -> None:
    """A JoinGroup member's subscription (first byte even) or a SyncGroup assignment (odd)."""
    if not data:
        return
    try:
        if data[0] & 1:
            decode_assignment(data[1:])
        else:
            decode_subscription(data[1:])
    except PayloadError:
        pass


# --- SASL --------------------------------------------------------------------------------------

USER, PASSWORD = "alice", "alice-secret"
#: where a SCRAM client-final token carries the server's nonce (the fuzzer cannot guess it)
NONCE_MARK = b"@NONCE@"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_credentials: CredentialStore | None = None
_audience = OAuthSettings(expected_audience=("kafka",), expected_issuer="issuer")


def _store() -> CredentialStore:
    global _credentials
    if _credentials is None:
        _credentials = CredentialStore(users={USER: {
            m: make_credential(m, PASSWORD, iterations=4096) for m in MECHANISMS[1:3]}})
    return _credentials


def sasl_tokens(data: bytes) -> None:
    """A SaslHandshake's mechanism (the first byte's low bits), then SaslAuthenticate tokens
    split at ``\\x00\\x00\\x00``: PLAIN, SCRAM client-first then client-final (with
    ``NONCE_MARK`` replaced by the exchange's nonce), OAUTHBEARER (unsecured JWS, with and
    without audience and issuer checks; with bit 3 set, the JWS header, claims and signature
    as raw parts)."""
    if not data:
        return
    mechanism = MECHANISMS[data[0] & 3]
    oauth = _audience if data[0] & 4 else OAuthSettings()
    settings = SaslSettings(mechanisms=MECHANISMS, credentials=_store(), oauth=oauth)
    auth = SaslAuthenticator(settings)
    auth.handshake(mechanism)
    tokens = data[1:].split(b"\x00\x00\x00")[:3]
    if mechanism == "OAUTHBEARER" and data[0] & 8:
        # the token's JWS parts given as they are, base64url-encoded here: the fuzzer mutates
        # the JSON of the header and claims, which it could not reach through base64
        parts = (base64.urlsafe_b64encode(t).rstrip(b"=") for t in (*tokens, b"", b"")[:3])
        tokens = [b"n,,\x01auth=Bearer " + b".".join(parts) + b"\x01\x01"]
    nonce = b""
    for token in tokens:
        token = token.replace(NONCE_MARK, nonce)
        _, _, reply = auth.authenticate(token)  # every refusal is an error code
        if reply.startswith(b"r="):
            nonce = reply[2:].split(b",")[0]


# --- HTTP: the control endpoint and the console ------------------------------------------------

def control_body(data: bytes) -> None:
    """A control endpoint JSON body, applied as ``POST /v1/faults`` (first byte even) or
    ``POST /v1/brokers/{id}/latency`` (odd) to a cluster's fault state. The endpoint answers
    ValueError, KeyError and TypeError with a 400."""
    if not data:
        return
    faults = Faults()
    try:
        body = parse_body(data[1:])
        if data[0] & 1:
            apply_latency(faults, 1, body)
        else:
            apply_fault(faults, body)
    except (ValueError, KeyError, TypeError):
        pass
    # what was accepted must be usable: a request delayed by NaN or forever is a hang, and
    # what a body queues is bounded (a body is at most a few KB; a count is not)
    if not all(math.isfinite(s) and s >= 0 for s in faults.latency_s.values()):
        raise AssertionError(f"latencies accepted: {faults.latency_s}")
    queued = sum(faults.pending().values())
    if queued > MAX_QUEUED_FAULTS + len(data):
        raise AssertionError(f"one body queued {queued} faults")


def console_form(data: bytes) -> None:
    """A console form body (urlencoded) through every parser the console's pages and writes run
    on its fields, and the body itself as a record value the message browser shows. Writes
    answer ValueError with a flash message, the message browser's query with a 400 page."""
    form = parse_form(data)
    try:
        _browse_query(form)
    except ValueError:
        pass
    show(data, form.get("format", "auto"))
    # after login the console redirects to ``next``: never to another site, as a browser reads
    # the Location header Starlette writes (it percent-quotes; browsers drop tabs and newlines)
    location = quote(_safe_next(form.get("next")), safe=":/%#?=@[]!$&'()*+,;")
    seen = location.replace("\t", "").replace("\n", "").replace("\r", "")
    if not seen.startswith("/") or seen.startswith("//") or "\\" in seen:
        raise AssertionError(f"login redirects off the console: {location!r}")
    for parse in (parse_configs, parse_headers, parse_time, int_or_none):
        try:
            parse(form.get(parse.__name__, ""))
        except ValueError:
            pass


# --- config files ------------------------------------------------------------------------------

def config_file(data: bytes) -> None:
    """A config file (TOML if the first byte is odd, else Java properties) read and validated
    as ``load_config`` does: every problem is a ConfigError."""
    if not data:
        return
    try:
        text = data[1:].decode("utf-8")
    except UnicodeDecodeError:
        return  # read_config_entries refuses it before parsing (a ConfigError)
    try:
        entries = parse_config_text(text, "fuzz", toml=bool(data[0] & 1))
        values = {key: value for key, value, _ in entries}
        build_config(values, {key: origin for key, _, origin in entries})
    except ConfigError:
        pass


# --- share groups: a share-partition's acknowledgements -------------------------------------

#: 40 records in batches of four, offsets 0..39: what the fuzzed members acquire
_SHARE_LOG = b"".join(build_batch([(None, b"v%d" % o) for o in range(base, base + 4)],
                                  base_offset=base) for base in range(0, 40, 4))
_SHARE_MEMBERS = ("m0", "m1", "m2")


def _share_read(offset: int, max_bytes: int) -> bytes:
    out = bytearray()
    for pos, header in iter_batches(_SHARE_LOG):
        if header.base_offset + header.last_offset_delta >= offset:
            if out and len(out) + header.size > max_bytes:
                break
            out += _SHARE_LOG[pos:pos + header.size]
    return bytes(out)


def _share_snapshot(sp: SharePartition) -> tuple[int, int, list[tuple[int, int, int, str]]]:
    return sp.start_offset, sp.end_offset, sorted(
        (o, r.state, r.delivery_count, r.member_id) for o, r in sp.in_flight.items())


def _share_invariants(sp: SharePartition) -> None:
    for offset, record in sp.in_flight.items():
        assert sp.start_offset <= offset < sp.end_offset, (offset, sp.start_offset)
        assert 0 < record.delivery_count <= sp.delivery_count_limit, (offset, record)
        assert (record.state is RecordState.ACQUIRED) == bool(record.member_id), (offset, record)
    assert sp.end_offset - sp.start_offset <= max(sp.max_record_locks, 1) + 4


def share_acknowledgements(data: bytes) -> None:
    """A share-partition driven by three members, the ShareFetch / ShareAcknowledge path of
    ``coordinator.share``: each op is one byte (low two bits: acquire, acknowledge, the clock
    moving on, a member leaving) and its arguments. Acknowledgement batches come from the
    bytes as a request carries them, so they overlap, descend, name records never acquired or
    held by another member and carry unknown types. What must hold: an acknowledgement
    answered with an error changed nothing, and after every op the records in flight are
    between the start and end offsets, counted at most ``group.share.delivery.count.limit``
    times, and acquired exactly when a member holds them. A broken invariant is a finding."""
    sp = SharePartition(0, 0, 3, 24)  # a cap below the 40 records, above three acquisitions
    now, pos = 0.0, 0
    while pos + 2 <= len(data) and pos < 4096:
        op, member = data[pos] & 3, _SHARE_MEMBERS[data[pos + 1] % 3]
        pos += 2
        if op == 0:
            records = data[pos] % 16 + 1 if pos < len(data) else 5
            pos += 1
            acquisition = sp.acquire(member, _share_read, max_records=records,
                                     max_bytes=1 << 16, now=now, lock_s=30)
            for first, last, count in acquisition.ranges:
                assert all(sp.in_flight[o].member_id == member
                           and sp.in_flight[o].delivery_count == count
                           for o in range(first, last + 1)), acquisition.ranges
        elif op == 1:
            batches = []
            for _ in range(data[pos] % 4 if pos < len(data) else 0):
                if pos + 4 > len(data):
                    break
                first = data[pos + 1] - 8  # a few negative offsets too
                last = first + data[pos + 2] % 9 - 1  # and last before first
                # one type for the batch, or one per offset (cut short when the bytes end)
                width = max(last - first + 1, 1) if data[pos + 3] & 1 else 1
                types = list(data[pos + 4:pos + 4 + width]) or [1]
                batches.append((first, last, [t % 6 for t in types]))
                pos += 3 + len(types)
            pos += 1
            before = _share_snapshot(sp)
            if sp.acknowledge(member, batches) is not None:
                assert _share_snapshot(sp) == before, batches
        elif op == 2:
            now += data[pos - 1] % 40  # the second byte: seconds, not a member
            sp.expire_locks(now)
        else:
            sp.release_member(member)
        _share_invariants(sp)


TARGETS: dict[str, Target] = {
    "request_frames": request_frames,
    "request_body": request_body,
    "record_batches": record_batches,
    "consumer_protocol": consumer_protocol,
    "sasl_tokens": sasl_tokens,
    "control_body": control_body,
    "console_form": console_form,
    "config_file": config_file,
    "share_acknowledgements": share_acknowledgements,
}

__all__ = ["TARGETS", "Target"]
