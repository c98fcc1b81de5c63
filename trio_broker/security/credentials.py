"""SASL user credentials: a JSON file of SCRAM salted hashes, and a helper to edit it.

Why only salted hashes: a stolen credentials file must not give away passwords. Each user has
one entry per SCRAM mechanism (Kafka's ``ScramCredential``: salt, stored key, server key,
iterations). PLAIN logins are checked against the same entries by recomputing the stored key
from the offered password, so no mechanism needs the password in clear.

File layout (``sasl.credentials.file``)::

    {"version": 1,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                           "server_key": "<base64>", "iterations": 4096},
                         "SCRAM-SHA-512": {...}}}}

The broker re-reads the file when its modification time changes, so users can be added or
removed without a restart; a file that fails to parse keeps the previous users (logged).

Command line (no broker needed)::

    python -m trio_broker.security.credentials add alice --file users.json   # prompts
    echo secret | python -m trio_broker.security.credentials add alice --file users.json \\
        --password-stdin
    python -m trio_broker.security.credentials remove alice --file users.json
    python -m trio_broker.security.credentials list --file users.json
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import getpass
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, make_credential, verify_password

LOGGER = logging.getLogger(__name__)

__all__ = ["CredentialStore", "CredentialsError", "add_user", "main", "remove_user"]

_FORMAT_VERSION = 1


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
                 users: dict[str, dict[str, ScramCredential]] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._users = users or {}
        self._mtime_ns: int | None = None
        if self.path is not None:
            self._users = _read(self.path)
            self._mtime_ns = self._stat()

    def _stat(self) -> int | None:
        assert self.path is not None
        try:
            return self.path.stat().st_mtime_ns
        except OSError:
            return None

    def maybe_reload(self) -> None:
        """Re-read the file if it changed since the last read (one ``stat``)."""
        if self.path is None:
            return
        mtime = self._stat()
        if mtime == self._mtime_ns:
            return
        self._mtime_ns = mtime
        try:
            self._users = _read(self.path)
        except CredentialsError as exc:
            LOGGER.error("keeping the previous SASL users: %s", exc)
            return
        LOGGER.info("reloaded %d SASL user(s) from %s", len(self._users), self.path)

    def scram(self, username: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(username, {}).get(mechanism)

    def verify_plain(self, username: str, password: str) -> bool:
        """Check a PLAIN login against any stored SCRAM entry (one PBKDF2; run off the loop)."""
        entries = self._users.get(username)
        if not entries:
            # Spend the same time as a real check so timing does not reveal unknown users.
            make_credential("SCRAM-SHA-256", password, salt=b"\x00" * 32)
            return False
        mechanism, credential = sorted(entries.items())[0]
        return verify_password(mechanism, credential, password)

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
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trio_broker.security.credentials",
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
