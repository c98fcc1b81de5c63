"""Every fuzz corpus input, replayed through its target without instrumentation.

The corpus (``fuzz/corpus/<target>/``) holds the seeds, what the fuzzer found that reached new
code, and one ``regress-*`` input per crash fixed: a parser that raises anything but its
documented errors on one of them fails here, in the normal suite, in seconds.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
sys.path.insert(0, str(FUZZ))

import targets  # noqa: E402


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_corpus_replays_without_unexpected_errors(name: str) -> None:
    inputs = sorted((FUZZ / "corpus" / name).iterdir())
    assert inputs, f"fuzz/corpus/{name} is empty"
    failures = []
    for path in inputs:
        try:
            targets.TARGETS[name](path.read_bytes())
        except Exception:
            failures.append(f"{path.name}: {traceback.format_exc(limit=-3)}")
    assert not failures, f"{len(failures)} of {len(inputs)} inputs:\n" + "\n".join(failures[:5])


def test_every_corpus_folder_has_a_target() -> None:
    assert {p.name for p in (FUZZ / "corpus").iterdir()} == set(targets.TARGETS)
