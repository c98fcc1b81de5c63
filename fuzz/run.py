"""Run one fuzz target under atheris (libFuzzer): ``python fuzz/run.py TARGET [libFuzzer args]``.

The project's modules (and ``tomllib``, which parses TOML config files for it) are
imported under atheris' instrumentation; the request decoders the codec compiles from the
schemas are generated functions, not imported ones, so they are compiled for every
(API key, version) up front and instrumented one by one. Every other argument goes to libFuzzer
unchanged (``-max_total_time``, ``-rss_limit_mb``, corpus directories: see the Makefile's
``fuzz`` target).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["trio_broker", "tomllib"]):
    import targets


def _instrument_request_decoders() -> None:
    from trio_broker.protocol import messages
    from trio_broker.protocol.errors import RemoteProtocolError

    for key, version in sorted(targets.REQUEST_VERSIONS):
        try:
            messages._decoder(key, "request", version)
        except RemoteProtocolError:  # an (API, version) without a request schema
            continue
    for found, fn in list(messages._decoders.items()):
        messages._decoders[found] = atheris.instrument_func(fn)


def main(argv: list[str]) -> None:
    # libFuzzer's merge (-merge=1) runs its inner passes as ``sh -c "<argv[0]> <flags>"``: the
    # first argument it is given is this interpreter and script, and the target travels in the
    # environment, since the inner command line has only flags.
    if len(argv) >= 2 and argv[1] in targets.TARGETS:
        name, flags = argv[1], argv[2:]
        os.environ["FUZZ_TARGET"] = name
    else:
        name, flags = os.environ.get("FUZZ_TARGET", ""), argv[1:]
    if name not in targets.TARGETS:
        sys.exit(f"usage: {argv[0]} TARGET [libFuzzer args]; targets: "
                 f"{', '.join(targets.TARGETS)}")
    if name in ("request_frames", "request_body"):
        _instrument_request_decoders()
    target = targets.TARGETS[name]

    def one_input(data: bytes) -> None:
        target(data)

    me = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))}"
    atheris.Setup([me, *flags], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
