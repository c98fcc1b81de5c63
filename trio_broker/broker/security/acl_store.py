"""ACLs kept on disk and applied at once: the authorizer the broker's handlers ask.

Why a file in the first log directory, replaced atomically: a single node has no metadata log to
hold ACLs (Kafka's KRaft ``AclControlManager``); the file is written (temp file, fsync, rename,
directory fsync) before the in-memory set changes, so an ACL a client was told exists survives a
crash, and the next request is judged by it without a restart.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from .acl import AUTHORIZER_CLASSES, AclBinding, AclFilter, Authorizer

LOGGER = logging.getLogger(__name__)

#: the file of ACLs in the first log directory
ACL_FILE = "acls.json"
_FORMAT_VERSION = 1


class AclStoreError(Exception):
    """The ACL file cannot be read (the broker refuses to start rather than allow everything)."""


class AclStore(Authorizer):
    """An ``Authorizer`` whose ACLs live in ``path``."""

    def __init__(self, path: Path, *, super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        super().__init__(super_users=super_users, allow_if_no_acl=allow_if_no_acl)
        self.path = path
        #: changes run in worker threads, one at a time; readers see the old or the new set
        self._write_lock = threading.Lock()
        self.replace_all(self._read())

    def _read(self) -> list[AclBinding]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise AclStoreError(f"cannot read the ACL file {self.path}: {exc}") from None
        try:
            doc = json.loads(text)
            return [AclBinding.from_json(entry) for entry in doc["acls"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise AclStoreError(f"the ACL file {self.path} does not parse: {exc!r}") from None

    def _save(self, bindings: set[AclBinding]) -> None:
        ordered = sorted(bindings, key=lambda b: (b.resource_type, b.name, b.pattern_type,
                                                   b.principal, b.host, b.operation,
                                                   b.permission))
        from .credentials import _write_atomically  # its imports wait for the first write

        _write_atomically(self.path, {"version": _FORMAT_VERSION,
                                      "acls": [b.to_json() for b in ordered]})
        self.replace_all(bindings)

    def add(self, bindings: Sequence[AclBinding]) -> None:
        """Create ``bindings`` (existing ones are kept once), durably, in one write."""
        with self._write_lock:
            new = set(self.acls) | set(bindings)
            if new != self.acls:
                self._save(new)

    def delete(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete the ACLs each filter matches, durably, in one write; per filter, what it
        matched."""
        with self._write_lock:
            current = self.acls
            matched = [sorted((b for b in current if f.matches(b)), key=repr) for f in filters]
            gone = {b for group in matched for b in group}
            if gone:
                self._save(set(current) - gone)
            return matched


def authorizer_from_config(log_dir: Path, authorizer_class: str, super_users: str,
                           allow_if_no_acl: bool) -> AclStore | None:
    """The broker's authorizer, or None when ``authorizer.class.name`` is empty.

    ``super_users`` is Kafka's ``super.users`` (``User:a;User:b``)."""
    name = authorizer_class.strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise AclStoreError(f"authorizer.class.name={name!r}: the supported authorizer is "
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    supers = [u.strip() for u in super_users.split(";") if u.strip()]
    return AclStore(log_dir / ACL_FILE, super_users=supers, allow_if_no_acl=allow_if_no_acl)
