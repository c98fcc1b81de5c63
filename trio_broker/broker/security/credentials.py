"""SASL user credentials: a JSON file of SCRAM salted hashes, and a helper to edit it.

Why only salted hashes: a stolen credentials file must not give away passwords. Each user has
one entry per SCRAM mechanism (Kafka's ``ScramCredential``: salt, stored key, server key,
iterations). PLAIN logins are checked against the same entries by recomputing the stored key
from the offered password, so no mechanism needs the password in clear.

Why PLAIN remembers verified logins: that recomputation is a PBKDF2 of a few milliseconds, which
Kafka's PLAIN (passwords compared in clear) does not pay, and clients that reconnect log in again
and again. After a PLAIN login succeeds, the store keeps an HMAC of the password under a random
key that never leaves the process, bound to the user's current stored key (a changed password
misses); the same login again costs one HMAC. Nothing is written to disk, and a guess that was
never right is never cached, so a wrong password always costs the full PBKDF2 (the broker runs
those one at a time: ``SaslSettings.plain_limiter``).

File layout (``sasl.credentials.file``)::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                           "server_key": "<base64>", "iterations": 4096},
                         "SCRAM-SHA-512": {...}}}}

The broker re-reads the file when it changes (a new inode, modification time or size), so
users can be added or removed without a restart; a file that fails to parse keeps the previous
users (logged). Admin clients manage the same users over the wire
(Describe/AlterUserScramCredentials, ``describe_scram_credentials`` and
``alter_scram_credentials`` below, Kafka's rules): each change is one atomic, fsynced replace of
the file, so it survives a crash and takes effect at the next login.

Command line (no broker needed)::

    python -m trio_broker.broker.security.credentials add alice --file users.json   # prompts
    echo secret | python -m trio_broker.broker.security.credentials add alice --file users.json \\
        --password-stdin
    python -m trio_broker.broker.security.credentials remove alice --file users.json
    python -m trio_broker.broker.security.credentials list --file users.json
"""

from __future__ import annotations

import argparse
import base64
import getpass
import hmac
import json
import logging
import os
import secrets
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ...protocol.errors import ErrorCode
from ..fileio import atomic_write
from .scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
    make_credential,
    verify_password,
)

LOGGER = logging.getLogger(__name__)

__all__ = ["CredentialStore", "CredentialsError", "ScramDeletion", "ScramUpsertion", "add_user",
           "alter_scram_credentials", "describe_scram_credentials", "main", "remove_user"]

_FORMAT_VERSION = 1
#: PLAIN logins remembered as verified (the least recently verified go first)
MAX_VERIFIED_LOGINS = 4096


class CredentialsError(ValueError):
    """The credentials file cannot be read or is not in the expected format."""


def _credential_from_json(doc: Any, where: str) -> ScramCredential:
    try:
        return ScramCredential(
            salt=base64.b64decode(doc["salt"], validate=True),
            stored_key=base64.b64decode(doc["stored_key"], validate=True),
            server_key=base64.b64decode(doc["server_key"], validate=True),
            iterations=int(doc["iterations"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CredentialsError(f"{where}: bad SCRAM entry ({exc})") from None


def _credential_to_json(cred: ScramCredential) -> dict[str, Any]:
    return {"salt": base64.b64encode(cred.salt).decode(),
            "stored_key": base64.b64encode(cred.stored_key).decode(),
            "server_key": base64.b64encode(cred.server_key).decode(),
            "iterations": cred.iterations}


def _parse(text: str, source: str) -> dict[str, dict[str, ScramCredential]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CredentialsError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("users", {}), dict):
        raise CredentialsError(f"{source}: expected an object with a 'users' object")
    users: dict[str, dict[str, ScramCredential]] = {}
    for user, mechs in doc.get("users", {}).items():
        if not isinstance(mechs, dict):
            raise CredentialsError(f"{source}: user {user!r}: expected an object")
        entry = {}
        for mech, cred in mechs.items():
            if mech not in MECHANISMS:
                raise CredentialsError(f"{source}: user {user!r}: unknown mechanism {mech!r}")
            entry[mech] = _credential_from_json(cred, f"{source}: user {user!r} {mech}")
        users[str(user)] = entry
    return users


def _read(path: Path) -> dict[str, dict[str, ScramCredential]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsError(f"{path}: {exc.strerror or exc}") from None
    return _parse(text, str(path))


class CredentialStore:
    """The users a broker accepts; re-read when the file changes."""

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 users: dict[str, dict[str, ScramCredential]] | None = None, *,
                 missing_ok: bool = False) -> None:
        """``missing_ok``: a ``path`` that does not exist yet is no user at all until it is
        written (the log dir's store, which AlterUserScramCredentials creates)."""
        self.path = Path(path) if path is not None else None
        self._users = users or {}
        self._version: tuple[int, int, int] | None = None
        # PLAIN logins verified since start: (user, mechanism, stored key) -> HMAC of the
        # password under a key that lives only in this process (module docstring)
        self._verified: OrderedDict[tuple[str, str, bytes], bytes] = OrderedDict()
        self._verified_secret = secrets.token_bytes(32)
        self._verified_lock = threading.Lock()
        if self.path is not None and not (missing_ok and not self.path.exists()):
            self._users = _read(self.path)
            self._version = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        """What changes when the file does: an atomic replace is a new inode even within one
        tick of the file system's clock."""
        assert self.path is not None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def maybe_reload(self) -> None:
        """Re-read the file if it changed since the last read (one ``stat``)."""
        if self.path is None:
            return
        version = self._stat()
        if version == self._version:
            return
        self._version = version
        try:
            self._users = _read(self.path)
        except CredentialsError as exc:
            LOGGER.error("keeping the previous SASL users: %s", exc)
            return
        LOGGER.info("reloaded %d SASL user(s) from %s", len(self._users), self.path)

    def scram(self, username: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(username, {}).get(mechanism)

    def _verified_key(self, username: str) -> tuple[str, str, bytes] | None:
        entries = self._users.get(username)
        if not entries:
            return None
        mechanism, credential = sorted(entries.items())[0]
        return username, mechanism, credential.stored_key

    def _tag(self, password: str) -> bytes:
        return hmac.new(self._verified_secret, password.encode("utf-8"), "sha256").digest()

    def plain_verified(self, username: str, password: str) -> bool:
        """Whether this PLAIN login matches one already verified against the user's current
        credential (one HMAC, no PBKDF2)."""
        key = self._verified_key(username)
        tag = None if key is None else self._verified.get(key)
        return tag is not None and hmac.compare_digest(tag, self._tag(password))

    def verify_plain(self, username: str, password: str) -> bool:
        """Check a PLAIN login against any stored SCRAM entry: one PBKDF2 (run off the loop)
        unless the same password was verified before (``plain_verified``)."""
        if self.plain_verified(username, password):
            return True
        key = self._verified_key(username)
        if key is None:
            # Spend the same time as a real check so timing does not reveal unknown users.
            make_credential("SCRAM-SHA-256", password, salt=b"\x00" * 32)
            return False
        user, mechanism, _ = key
        if not verify_password(mechanism, self._users[user][mechanism], password):
            return False
        with self._verified_lock:
            self._verified[key] = self._tag(password)
            while len(self._verified) > MAX_VERIFIED_LOGINS:
                self._verified.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._users)

    def __contains__(self, username: object) -> bool:
        return username in self._users


def _load_doc(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"version": _FORMAT_VERSION, "users": {}}
    users = _read(path)  # validates
    return {"version": _FORMAT_VERSION,
            "users": {u: {m: _credential_to_json(c) for m, c in e.items()}
                      for u, e in users.items()}}


def _write_atomically(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode("utf-8")
    # the command line may write the file while a broker does: a temp file per process
    atomic_write(path, data, mode=0o600, tmp_suffix=f".{os.getpid()}.tmp")


def add_user(path: str | os.PathLike[str], username: str, password: str, *,
             mechanisms: Iterable[str] = tuple(MECHANISMS),
             iterations: int = MIN_ITERATIONS) -> None:
    """Add or replace ``username`` in the credentials file (created if missing)."""
    if not username or "," in username or "=" in username:
        # Not forbidden by SCRAM (it escapes them), but Kafka principals are simpler without.
        raise CredentialsError(f"user name {username!r}: expected no ',' or '=' and not empty")
    p = Path(path)
    doc = _load_doc(p)
    entry = {}
    for mech in mechanisms:
        if mech not in MECHANISMS:
            raise CredentialsError(f"unknown mechanism {mech!r}: expected one of "
                                   f"{', '.join(MECHANISMS)}")
        entry[mech] = _credential_to_json(make_credential(mech, password, iterations=iterations))
    doc["users"][username] = entry
    _write_atomically(p, doc)


def remove_user(path: str | os.PathLike[str], username: str) -> bool:
    """Remove ``username``; False if it was not there."""
    p = Path(path)
    doc = _load_doc(p)
    if doc["users"].pop(username, None) is None:
        return False
    _write_atomically(p, doc)
    return True


# --- over the wire: Describe/AlterUserScramCredentials ---------------------------------------

#: one read-modify-write of a credentials file at a time (alters run in worker threads)
_ALTER_LOCK = threading.Lock()
_DUPLICATE = "A user credential cannot be altered twice in the same request"

#: (user, error, error message) in the order Kafka answers them
UserResult = tuple[str, ErrorCode, str | None]


@attrs.frozen
class ScramDeletion:
    user: str
    #: "SCRAM-SHA-256" / "SCRAM-SHA-512"; None for a mechanism type Kafka does not know
    mechanism: str | None


@attrs.frozen
class ScramUpsertion:
    user: str
    mechanism: str | None
    iterations: int
    salt: bytes
    #: Hi(password, salt, iterations): the client derives it; the password never travels
    salted_password: bytes


def _users_of(path: str | os.PathLike[str] | None) -> dict[str, dict[str, ScramCredential]]:
    if not path or not Path(path).exists():
        return {}
    return _read(Path(path))


def describe_scram_credentials(path: str | os.PathLike[str] | None, users: Sequence[str] | None,
                               ) -> list[tuple[str, ErrorCode, str | None, dict[str, int]]]:
    """Kafka's ``ScramImage.describe``: (user, error, message, {mechanism: iterations}).

    No names (None or empty) describes every user; a name asked twice is DUPLICATE_RESOURCE, a
    user without credentials RESOURCE_NOT_FOUND."""
    known = _users_of(path)
    asked: dict[str, bool] = {}  # user -> asked more than once
    for user in users or sorted(known):
        asked[user] = user in asked
    out: list[tuple[str, ErrorCode, str | None, dict[str, int]]] = []
    for user, duplicate in asked.items():
        if duplicate:
            out.append((user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials "
                        f"for the same user twice in a single request: {user}", {}))
        elif not known.get(user):
            out.append((user, ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {user}", {}))
        else:
            out.append((user, ErrorCode.NONE, None,
                        {m: c.iterations for m, c in sorted(known[user].items())}))
    return out


def _check_user_and_mechanism(user: str, mechanism: str | None) -> UserResult | None:
    if not user:
        return user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter_scram_credentials(path: str | os.PathLike[str],
                            deletions: Sequence[ScramDeletion],
                            upsertions: Sequence[ScramUpsertion]) -> list[UserResult]:
    """Kafka's ``ScramControlManager.alterCredentials`` over the credentials file.

    A user may appear once per request; deleting a credential that does not exist is
    RESOURCE_NOT_FOUND; iterations outside 4096..16384 are UNACCEPTABLE_CREDENTIAL. The valid
    changes are written together in one atomic replace; if that fails, they all fail with
    KAFKA_STORAGE_ERROR. Blocking: run it in a worker thread.
    """
    with _ALTER_LOCK:
        users = _users_of(path)
        errors: dict[str, UserResult] = {}
        deleting: dict[str, ScramDeletion] = {}
        upserting: dict[str, ScramUpsertion] = {}
        for d in deletions:
            if d.user in errors:
                continue
            if deleting.pop(d.user, None) is not None:
                errors[d.user] = (d.user, ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE)
                continue
            error = _check_user_and_mechanism(d.user, d.mechanism)
            if error is None and d.mechanism not in users.get(d.user, {}):
                error = (d.user, ErrorCode.RESOURCE_NOT_FOUND,
                         "Attempt to delete a user credential that does not exist")
            if error is None:
                deleting[d.user] = d
            else:
                errors[d.user] = error
        for u in upsertions:
            if u.user in errors:
                continue
            if (deleting.pop(u.user, None) is not None
                    or upserting.pop(u.user, None) is not None):
                errors[u.user] = (u.user, ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE)
                continue
            error = _check_user_and_mechanism(u.user, u.mechanism)
            if error is None and u.iterations < MIN_ITERATIONS:
                error = (u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif error is None and u.iterations > MAX_ITERATIONS:
                error = (u.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if error is None:
                upserting[u.user] = u
            else:
                errors[u.user] = error
        for d in deleting.values():
            entry = users[d.user]
            del entry[d.mechanism]  # type: ignore[arg-type]  # checked above
            if not entry:
                del users[d.user]
        for u in upserting.values():
            assert u.mechanism is not None
            users.setdefault(u.user, {})[u.mechanism] = credential_from_salted_password(
                u.mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations)
        changed = [*deleting, *upserting]
        if changed:
            doc = {"version": _FORMAT_VERSION,
                   "users": {user: {m: _credential_to_json(c) for m, c in entry.items()}
                             for user, entry in users.items()}}
            try:
                _write_atomically(Path(path), doc)
            except OSError as exc:
                LOGGER.error("writing SCRAM credentials to %s failed: %s", path, exc)
                return [(user, ErrorCode.KAFKA_STORAGE_ERROR, f"Writing {Path(path).name} "
                         f"failed: {exc.strerror or exc}") for user in changed] + \
                    list(errors.values())
            LOGGER.info("SCRAM credentials of %s changed over the wire", ", ".join(changed))
        return [(user, ErrorCode.NONE, None) for user in changed] + list(errors.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trio_broker.broker.security.credentials",
                                     description="Edit a SASL credentials file.")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add or replace a user")
    add.add_argument("username")
    add.add_argument("--mechanism", action="append", choices=list(MECHANISMS),
                     help="store only these mechanisms (default: all)")
    add.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    rm = sub.add_parser("remove", help="remove a user")
    rm.add_argument("username")
    listing = sub.add_parser("list", help="list user names and their mechanisms")
    for p in (add, rm, listing):
        p.add_argument("--file", required=True, help="the sasl.credentials.file")
    args = parser.parse_args(argv)
    try:
        if args.command == "add":
            if args.password_stdin:
                password = sys.stdin.readline().rstrip("\r\n")
            else:
                password = getpass.getpass(f"password for {args.username}: ")
                if getpass.getpass("again: ") != password:
                    print("passwords differ", file=sys.stderr)
                    return 2
            if not password:
                print("empty password refused", file=sys.stderr)
                return 2
            add_user(args.file, args.username, password,
                     mechanisms=args.mechanism or tuple(MECHANISMS), iterations=args.iterations)
        elif args.command == "remove":
            if not remove_user(args.file, args.username):
                print(f"no user {args.username!r}", file=sys.stderr)
                return 1
        else:
            for user, entry in sorted(_read(Path(args.file)).items()):
                print(f"{user}\t{','.join(sorted(entry))}")
    except (CredentialsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
