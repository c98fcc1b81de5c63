"""Names of a package imported from its modules on first use (PEP 562).

Why: a package's public face should not import everything behind it. A Spark executor that
needs ``trio_broker.spark``, or a broker without TLS or SASL listeners, should not pay for the
broker's or the security modules' imports just by naming the package.

The package's rule for deferring an import: a module imports what it uses at its top, unless a
measured cost says otherwise: a broker's start (the modules ``tests/api/test_startup_imports.py``
lists as deferred), a face that must stay light (this package's ``__init__``, the pytest plugin
pytest loads in every run, ``trio_broker.client``, which every command-line tool imports as
the blocking client's parent), or an optional dependency that must fail politely (pyspark). Then:

- a package's or a face's public names are deferred here, with ``lazy_names``;
- a module that only one path needs is imported in the function that first needs it (the
  broker's handler loaders in ``broker/apis/registry.py`` are such functions; ``OnFirstUse`` only
  keeps the table a loader returns).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, modules: Mapping[str, str], *, relative_to: str | None = None,
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: name -> the submodule that defines it.

    ``package`` may be a plain module too; its ``modules`` are then named relative to the
    package ``relative_to``. A name is imported once and then kept in the module's namespace,
    so later lookups are ordinary attribute reads.
    """
    namespace = sys.modules[package].__dict__
    anchor = relative_to or package

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", anchor), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *modules})

    return __getattr__, __dir__
