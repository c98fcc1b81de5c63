"""An export's identity and record on disk: ``<out>/_exports/<id>.json`` and its data files.

Why: a batch export reads a fixed set of offset ranges, and those ranges are its identity. Its
data files are named ``export-<id>-part-...``; running the same export again replaces them
instead of adding a second copy, an export whose ranges contain an earlier one's replaces that
one too, and an export that only partly overlaps an earlier one is refused (it would duplicate
records). Names starting with ``_`` are ignored by Spark and pyarrow readers, so the manifests
and the staging directory never show up as data.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..client.blocking import TopicPartition
from ._options import OffsetRange, SourceOptionError, offsets_json

MANIFEST_DIR = "_exports"


def export_id(ranges: Iterable[OffsetRange]) -> str:
    """The same ranges always give the same id, whatever their order."""
    canonical = json.dumps(sorted((r.topic, r.partition, r.start, r.end) for r in ranges))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def load_manifests(out: Path) -> list[dict[str, Any]]:
    """The manifests of earlier exports into ``out``."""
    directory = out / MANIFEST_DIR
    if not directory.is_dir():
        return []
    manifests = []
    for path in sorted(directory.glob("*.json")):
        try:
            manifests.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise SourceOptionError(f"cannot read export manifest {path}: {exc}") from None
    return manifests


def _spans(manifest: Mapping[str, Any]) -> dict[tuple[str, int], tuple[int, int]]:
    return {(r["topic"], int(r["partition"])): (int(r["start"]), int(r["end"]))
            for r in manifest["ranges"] if int(r["end"]) > int(r["start"])}


def replaced_exports(manifests: list[dict[str, Any]], ranges: list[OffsetRange],
                     this_id: str) -> list[dict[str, Any]]:
    """Earlier exports this one supersedes; a partial overlap is refused."""
    new = {(r.topic, r.partition): (r.start, r.end) for r in ranges if r.size}
    replaced = []
    for manifest in manifests:
        old = _spans(manifest)
        contained = all(tp in new and new[tp][0] <= lo and hi <= new[tp][1]
                        for tp, (lo, hi) in old.items())
        if contained or manifest.get("export_id") == this_id:
            replaced.append(manifest)
            continue
        clashes = [f"{t}-{p} {max(lo, new[t, p][0])}..{min(hi, new[t, p][1]) - 1}"
                   for (t, p), (lo, hi) in old.items()
                   if (t, p) in new and max(lo, new[t, p][0]) < min(hi, new[t, p][1])]
        if clashes:
            ends = offsets_json(continuation(manifest, ranges))
            raise SourceOptionError(
                f"these offsets were already exported by export {manifest['export_id']} and "
                f"would be duplicated: {', '.join(clashes)}. Export a range that contains it "
                f"(to replace it) or continue after it with --starting-offsets '{ends}'")
    return replaced


def continuation(manifest: Mapping[str, Any],
                 ranges: list[OffsetRange]) -> dict[TopicPartition, int]:
    """Starting offsets that continue after ``manifest``'s export, for every partition
    ``ranges`` covers (empty ones too: Spark refuses offsets that leave a partition out)."""
    ends = {(r["topic"], int(r["partition"])): int(r["end"]) for r in manifest["ranges"]}
    return {r.tp: ends.get((r.topic, r.partition), r.start) for r in ranges}


def build_manifest(*, this_id: str, created: str, bootstrap_servers: str, topics: list[str],
                   fmt: str, partition_by: Iterable[str], ranges: list[OffsetRange],
                   records: int, payload_bytes: int, files: list[str],
                   replaced: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON record of one finished export (docs/spark.md lists its fields)."""
    return {
        "export_id": this_id,
        "created": created,
        "bootstrap_servers": bootstrap_servers,
        "topics": topics,
        "format": fmt,
        "partition_by": list(partition_by),
        "ranges": [{"topic": r.topic, "partition": r.partition, "start": r.start,
                    "end": r.end} for r in ranges],
        "starting_offsets": json.loads(offsets_json({r.tp: r.start for r in ranges})),
        "ending_offsets": json.loads(offsets_json({r.tp: r.end for r in ranges})),
        "records": records,
        "payload_bytes": payload_bytes,
        "files": files,
        "replaced": sorted(m["export_id"] for m in replaced),
    }


def publish(staging: Path, out: Path, this_id: str) -> list[str]:
    """Move the staged data files into ``out`` under the export's name; returns them."""
    prefix = f"export-{this_id}-"
    published = []
    for path in sorted(staging.rglob("*")):
        rel = path.relative_to(staging)
        if not path.is_file() or any(part.startswith(("_", ".")) for part in rel.parts):
            continue
        target = out / rel.parent / (prefix + rel.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        published.append(str(target.relative_to(out)))
    shutil.rmtree(staging, ignore_errors=True)
    return published


def write_manifest(out: Path, manifest: Mapping[str, Any]) -> None:
    """Write atomically: a reader sees the old manifest or the new one, never half of one."""
    directory = out / MANIFEST_DIR
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{manifest['export_id']}.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(tmp, directory / f"{manifest['export_id']}.json")


def remove_exports(out: Path, replaced: list[dict[str, Any]], *, keep_id: str,
                   keep_files: Iterable[str]) -> None:
    """Delete the files of superseded exports (an earlier run of this one included)."""
    keep = set(keep_files)
    for manifest in replaced:
        for name in manifest.get("files", []):
            if name not in keep:
                (out / name).unlink(missing_ok=True)
        if manifest["export_id"] != keep_id:
            (out / MANIFEST_DIR / f"{manifest['export_id']}.json").unlink(missing_ok=True)
