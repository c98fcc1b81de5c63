"""What `make native` left in the tree: which request-path modules are compiled, and whether any
changed after it ran (an extension module is imported before the ``.py`` beside it, so a stale
one would run old code without a word). The list, the suffix and the shared library's name are
the build script's own (``tools/build_native.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("build_native", ROOT / "tools" / "build_native.py")
assert _spec is not None
assert _spec.loader is not None
build_native = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_native)

MODULE_LIST: Path = build_native.MODULE_LIST
SUFFIX: str = build_native.SUFFIX


def listed() -> list[Path]:
    """The sources ``tools/native-modules`` names."""
    return [ROOT / module for module in build_native.modules()]


def compiled() -> list[Path]:
    """The listed sources that have a compiled module beside them."""
    return [path for path in listed() if path.with_suffix(SUFFIX).exists()]


def stale() -> list[Path]:
    """Compiled sources changed since they were compiled: since the group's shared library (all
    their code) was built; a module's own extension is a shim, left as it was by a rebuild."""
    if not compiled():
        return []
    built = [p.stat().st_mtime for p in build_native.shared_libraries()]
    if not built:
        return compiled()
    return [path for path in compiled() if path.stat().st_mtime > min(built)]
