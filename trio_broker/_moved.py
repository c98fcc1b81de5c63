"""Old import paths of modules that moved, kept working for one release with a warning.

Why an import hook and not a stub module per old path: the tree draws the architecture, and a
stub per moved module would draw the old one beside it. One table says where each old path went
(longest prefix first); importing an old path imports the new module, gives it under the old
name too, and warns once with ``DeprecationWarning`` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: old dotted path under ``trio_broker.`` -> its new one; to be removed in the next release
MOVED: dict[str, str] = {
    "client_core": "client.core",
    "client.admin": "client.trio.admin",
    "client.config": "client.trio.config",
    "client.connection": "client.trio.connection",
    "client.consumer": "client.trio.consumer",
    "client.consumer.group_coordinator": "client.trio.consumer.classic_member",
    "client.consumer.coordinator": "client.trio.consumer.coordinator_lookup",
    "client.errors": "client.trio.errors",
    "client.network": "client.trio.network",
    "client.offsets": "client.trio.offsets",
    "client.producer": "client.trio.producer",
    "blocking_client": "client.blocking",
    "config": "broker.config",
    "metrics": "broker.metrics",
    "network.cleaner_metrics": "broker.metrics.collectors.cleaner",
    "network.state_metrics": "broker.metrics.collectors.state",
    "security": "broker.security",
    "log": "broker.storage",
    "log._files": "broker.storage.files",
    "log.log_duties": "broker.storage.dir_checkpoints",
    "log.offload": "broker.offload",
    "coordinator": "broker.coordinator",
    "broker.coordinator.share.group_configs": "broker.coordinator.group_configs",
    "apis": "broker.apis",
    "apis.state": "broker.server.state",
    "apis.replicas": "broker.server.cluster_model",
    "apis.purgatory": "broker.server.purgatory",
    "apis.authz": "broker.server.authz",
    "apis.authorized_operations": "broker.server.authorized_operations",
    "apis.throttle": "broker.server.throttle",
    "apis.context": "broker.server.context",
    "apis.telemetry_state": "broker.server.telemetry_state",
    "apis.faults": "testing.faults",
    "apis.fault_state": "testing.fault_state",
    "apis.fault_responses": "testing.fault_responses",
    "apis.records": "broker.apis.delete_records",
    "apis.cluster": "broker.apis.cluster_admin",
    "network": "broker.network",
    "http": "broker.http",
    "http.control": "testing.control",
    "cluster": "testing",
    "cluster.runtime": "testing.cluster",
    "cluster.threaded": "testing.threaded",
    "loop_thread": "testing.loop_thread",
    "spark._classes": "spark._class_archive",
}
_PREFIX = "trio_broker."


def new_name(old: str) -> str | None:
    """The module ``old`` (a full dotted name) moved to, or None if it did not move."""
    if not old.startswith(_PREFIX):
        return None
    parts = old[len(_PREFIX):].split(".")
    for n in range(len(parts), 0, -1):
        target = MOVED.get(".".join(parts[:n]))
        if target is not None:
            return _PREFIX + ".".join([target, *parts[n:]])
    return None


class _Alias:
    """Loads an old path as the module at its new one."""

    def __init__(self, new: str) -> None:
        self.new = new
        self._spec: importlib.machinery.ModuleSpec | None = None
        self._loader: object = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.new)
        self._spec, self._loader = module.__spec__, getattr(module, "__loader__", None)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system stamped the old name's spec on the module: give it its own back
        module.__spec__ = self._spec
        module.__loader__ = self._loader  # type: ignore[assignment]

    def get_code(self, fullname: str) -> types.CodeType:
        """What ``python -m <old path>`` runs: the new module, as ``__main__``."""
        return compile(f"import runpy\nrunpy.run_module({self.new!r}, run_name='__main__', "
                       "alter_sys=True)\n", f"<{fullname}, moved to {self.new}>", "exec")


class MovedModuleFinder:
    """Answers an old path with the module now at its new one.

    Why no ``importlib.abc`` base classes: the import system calls finders and loaders by their
    methods (``find_spec``; ``create_module``, ``exec_module``), and ``importlib.abc`` pulls in
    ``importlib.resources``, which every ``import trio_broker`` would pay for.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; the old path goes away in the next release",
                      DeprecationWarning, stacklevel=_caller_level())
        # typed as importlib.abc.Loader, whose only extra is the legacy load_module: never called
        # on a loader that has exec_module
        loader = cast("Loader", _Alias(new))
        return importlib.machinery.ModuleSpec(
            fullname, loader, is_package=real.submodule_search_locations is not None)


def _caller_level() -> int:
    """The stack level of the first frame outside the import system, for the warning."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (frame.f_code.co_filename.startswith("<frozen importlib")
                                 or frame.f_code.co_filename == __file__):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
