"""`make native`: the request path compiled with mypyc, every listed module or none, never stale,
and what `make test` runs."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from tests.native_build import MODULE_LIST, ROOT, SUFFIX, compiled, listed, stale


def _module_name(path: os.PathLike[str]) -> str:
    return ".".join(os.path.relpath(path, ROOT).removesuffix(".py").split(os.sep))


def test_every_listed_module_is_one_of_the_package() -> None:
    paths = listed()
    assert len(paths) == len(set(paths)) > 0
    for path in paths:
        assert path.is_file(), f"{MODULE_LIST.name} names {path}, which does not exist"
        assert _module_name(path).startswith("trio_broker.")


def test_every_listed_module_is_compiled_or_none_is_and_none_is_stale() -> None:
    assert compiled() in ([], listed())
    assert stale() == []


def test_the_modules_imported_are_the_compiled_ones_when_make_test_built_them() -> None:
    compiled_loaded = {_module_name(path): str(importlib.import_module(_module_name(path)).__file__
                                               ).endswith(SUFFIX) for path in listed()}
    # set by `make test` (not TRIO_BROKER_*: a served broker reads those as its config)
    if os.environ.get("EXPECT_NATIVE_BUILD") == "1":
        assert all(compiled_loaded.values()), compiled_loaded
    else:
        assert len(set(compiled_loaded.values())) == 1, compiled_loaded


def test_unknown_arguments_get_the_usage_line() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_native.py"), "--bogus"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("build_native: unknown arguments --bogus; usage: ")
