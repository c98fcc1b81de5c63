"""CRC-32C (Castagnoli), the checksum of record batches and of the broker's own record files.

Why not ``from crc32c import crc32c``: the ``crc32c`` package's ``__init__`` reads its own
version with ``importlib.metadata`` (which imports ``email``, ``zipfile``, ``csv``...), which
every broker start would pay for a function that lives in the package's C extension
(docs/benchmarks.md, "Start-up"). The
extension is loaded here on its own, the package's ``__init__`` skipped; if the package's
layout ever differs, the ordinary import is used.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any

__all__ = ["crc32c"]


def _load() -> Callable[..., int]:
    spec = importlib.util.find_spec("crc32c")  # finds the package without running it
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.exists(path):
                continue
            ext = importlib.util.spec_from_file_location("crc32c._crc32c", path)
            if ext is None or ext.loader is None:
                break
            module: Any = importlib.util.module_from_spec(ext)
            ext.loader.exec_module(module)
            function: Callable[..., int] = module.crc32c
            return function
    from crc32c import crc32c as function

    return function


#: ``crc32c(data, value=0) -> int``: the CRC-32C of a bytes-like ``data`` (continuing ``value``)
crc32c: Callable[..., int] = _load()
