"""What `make native` left in the tree: which request-path modules are compiled, and whether any
changed after it ran (an extension module is imported before the ``.py`` beside it, so a stale
one would run old code without a word)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LIST = ROOT / "tools" / "native-modules"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def listed() -> list[Path]:
    """The sources ``tools/native-modules`` names."""
    lines = MODULE_LIST.read_text().splitlines()
    return [ROOT / line.strip() for line in lines if line.strip() and not line.startswith("#")]


def compiled() -> list[Path]:
    """The listed sources that have a compiled module beside them."""
    return [path for path in listed() if path.with_suffix(SUFFIX).exists()]


def stale() -> list[Path]:
    """Compiled sources changed since they were compiled: since the group's shared library (all
    their code) was built; a module's own extension is a shim, left as it was by a rebuild."""
    if not compiled():
        return []
    built = [p.stat().st_mtime for p in (ROOT / "trio_broker").glob(f"_native__mypyc*{SUFFIX}")]
    if not built:
        return compiled()
    return [path for path in compiled() if path.stat().st_mtime > min(built)]
