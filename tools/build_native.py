"""Compile the request path's modules with mypyc, in place: ``make native``.

Why: interpreted, a Produce at 100 connections costs about 56 µs of broker CPU; compiled, about
36 µs (docs/benchmarks.md, "Scale"). The sources stay plain Python and the package runs
interpreted wherever this step has not run. The modules compiled are listed in
``tools/native-modules``; the shared library is ``trio_broker/_native__mypyc*.so``.

Usage: tools/build_native.py [--clean]   (--clean removes the compiled modules)
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LIST = ROOT / "tools" / "native-modules"
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"


def modules() -> list[str]:
    lines = MODULE_LIST.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def shared_libraries() -> list[Path]:
    """The group's shared library (all the compiled code; each module's own file is a shim)."""
    return sorted((ROOT / "trio_broker").glob(f"_native__mypyc*{SUFFIX}"))


def built_files() -> list[Path]:
    """Every compiled file this step makes (or made) in the tree."""
    return [ROOT / Path(m).with_suffix(SUFFIX) for m in modules()] + shared_libraries()


def clean() -> None:
    for path in built_files():
        path.unlink(missing_ok=True)
    shutil.rmtree(ROOT / "build" / "native", ignore_errors=True)


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import Distribution

    # mypyc type-checks the modules first, with the project's mypy settings (pyproject.toml)
    extensions = mypycify(modules(), opt_level="3", group_name="trio_broker._native",
                          target_dir=str(ROOT / "build" / "native" / "c"))
    dist = Distribution({"name": "trio-broker-native", "ext_modules": extensions})
    command = dist.get_command_obj("build_ext")
    command.inplace = True  # type: ignore[attr-defined]
    command.build_temp = str(ROOT / "build" / "native" / "temp")  # type: ignore[attr-defined]
    dist.run_command("build_ext")
    for path in built_files():  # built from the sources as they are now, even where unchanged
        path.touch()


def main(argv: list[str]) -> int:
    os.chdir(ROOT)  # mypyc names the modules by their paths from here
    if argv == ["--clean"]:
        clean()
        return 0
    if argv:
        usage = (__doc__ or "").strip().splitlines()[-1]
        print(f"build_native: unknown arguments {' '.join(argv)}; usage: {usage}", file=sys.stderr)
        return 2
    try:
        build()
    except (Exception, SystemExit) as exc:
        clean()  # never leave part of the modules compiled
        print(f"build_native: compiling the modules of {MODULE_LIST.relative_to(ROOT)} failed "
              f"({exc!r}; mypyc's or the compiler's message above); nothing was left compiled",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
