"""Names of a package imported from its modules on first use (PEP 562).

Why: a package's public face should not import everything behind it. A Spark executor that
needs ``trio_broker.spark``, or a broker without TLS or SASL listeners, should not pay for the
broker's or the security modules' imports just by naming the package.
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
