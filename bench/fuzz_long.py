"""Long fuzzing run: the decoders in process, then a live broker process over sockets.

Usage: .venv/bin/python bench/fuzz_long.py [--decode-frames N] [--live-frames N] [--seconds S]

Phase 1 feeds hypothesis-generated hostile frames (well-formed requests for every advertised
API and version, mutated ones, random bytes behind valid headers) to ``decode_request_header``
/ ``decode_request_body`` and counts anything other than ``RemoteProtocolError``. Phase 2 feeds
the same kinds of frames to a ``trio-broker serve`` process, one connection per frame followed by
an ApiVersions probe, checks a well-behaved client and the broker's RSS every 200 frames, and
counts tracebacks in the broker's log (a crashed handler or connection task). Prints figures
for docs/reliability.md.
"""

from __future__ import annotations

import argparse
import collections
import re
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings

from tests.hostile.fuzz import (
    API_VERSIONS,
    feed,
    hostile_frames,
    well_behaved_client_ok,
)
from tests.hostile.harness import BrokerProcess
from trio_broker.protocol.errors import RemoteProtocolError
from trio_broker.protocol.messages import decode_request_body, decode_request_header


def _chunks(total: int, seconds: float, body: Any) -> float:
    """Run ``body(frame)`` on hostile frames in chunks until ``total`` frames or ``seconds``.

    Chunks, because a hypothesis run cannot be stopped early without being reported as a
    failure; each chunk draws fresh random examples.
    """
    t0 = time.monotonic()
    done = 0
    while done < total and time.monotonic() - t0 < seconds:
        n = min(_CHUNK, total - done)
        settings(_SETTINGS, max_examples=n)(given(frame=hostile_frames())(body))()
        done += n
    return time.monotonic() - t0


_CHUNK = 500
_SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def decode_phase(frames: int, seconds: float) -> dict[str, object]:
    crashes: collections.Counter[str] = collections.Counter()
    outcome: collections.Counter[str] = collections.Counter()

    def run(frame: bytes) -> None:
        (size,) = struct.unpack_from(">i", frame)
        payload = frame[4:4 + max(size, 0)]
        try:
            decode_request_body(decode_request_header(payload), payload)
            outcome["decoded"] += 1
        except RemoteProtocolError:
            outcome["RemoteProtocolError"] += 1
        except Exception as exc:  # anything else is what the fuzzer looks for
            crashes[f"{type(exc).__name__}: {exc}"[:160]] += 1

    elapsed = _chunks(frames, seconds, run)
    return {"frames": sum(outcome.values()) + sum(crashes.values()), "outcome": dict(outcome),
            "crashes": dict(crashes), "seconds": round(elapsed, 1)}


#: the broker process may use at most this much memory while being fuzzed
RSS_BOUND_KB = 256 * 1024


def live_phase(frames: int, seconds: float, work_dir: Path) -> dict[str, object]:
    outcome: collections.Counter[str] = collections.Counter()
    rss_samples: list[int] = []
    unanswered = 0
    over_bound: list[str] = []
    with BrokerProcess(work_dir / "logs", **{"connections.max.idle.ms": 2000,
                                              "socket.request.max.bytes": 1 << 20,
                                              "group.initial.rebalance.delay.ms": 0}) as b:
        rss_samples.append(b.rss_kb())

        def run(frame: bytes) -> None:
            nonlocal unanswered
            if not b.alive() or over_bound:
                return
            outcome[feed(b.address, frame, timeout_s=2)] += 1
            if b.alive() and b.rss_kb() > RSS_BOUND_KB:
                over_bound.append(frame.hex())
                (work_dir / "over-bound-frame.hex").write_text(frame.hex())
            if sum(outcome.values()) % 200 == 0:
                if not well_behaved_client_ok(b.address):
                    unanswered += 1
                rss_samples.append(b.rss_kb())

        elapsed = _chunks(frames, seconds, run)
        alive = b.alive()
        final_ok = alive and well_behaved_client_ok(b.address)
        if alive:
            rss_samples.append(b.rss_kb())
        log = b.log_text()
    tracebacks = collections.Counter(
        m.group(1) for m in re.finditer(r"\n(\w+(?:Error|Exception)[^\n]*)\n", log)
        if "Traceback" in log)
    return {"frames": sum(outcome.values()), "outcome": dict(outcome),
            "broker_alive": alive, "well_behaved_client_ok_at_end": final_ok,
            "well_behaved_client_failures": unanswered,
            "tracebacks_in_log": log.count("Traceback"), "exceptions": dict(tracebacks),
            "rss_kb_first_last_max": (rss_samples[0], rss_samples[-1], max(rss_samples)),
            "rss_bound_exceeded_by_frame": over_bound[:1],
            "seconds": round(elapsed, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode-frames", type=int, default=100_000)
    parser.add_argument("--live-frames", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=600,
                        help="time limit of each phase")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="keep the broker's data and log here (default: a temp dir)")
    args = parser.parse_args()
    print(f"(api, version) pairs covered: {len(API_VERSIONS)}")
    decode = decode_phase(args.decode_frames, args.seconds)
    print("decode phase:", decode)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        live = live_phase(args.live_frames, args.seconds, work)
    print("live phase:", live)
    crashes = len(decode["crashes"]) + live["tracebacks_in_log"]  # type: ignore[arg-type]
    ok = (crashes == 0 and live["broker_alive"] and live["well_behaved_client_ok_at_end"]
          and not live["rss_bound_exceeded_by_frame"])
    print(f"crashes found: {crashes}; {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
