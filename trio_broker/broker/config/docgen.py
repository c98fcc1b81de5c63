"""Write the key tables of docs/configuration.md from the key definitions.

Why generated: the tables list some four hundred keys with their defaults and what this broker
does with each; written by hand they would drift from the code. The prose of the document is
kept by hand; each table sits between ``<!-- BEGIN name -->`` and ``<!-- END name -->`` markers
and is replaced. ``python -m trio_broker.broker.config.docgen [docs/configuration.md]`` rewrites the
file; a test fails when the file and the definitions disagree.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .defs import ConfigKey, Support
from .kafka_keys import AREAS, KAFKA_BROKER_KEYS
from .keys import ALIASES, BROKER_KEYS, HONOURED_KEYS
from .topic_keys import TOPIC_KEYS

__all__ = ["render_document", "sections"]

DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
_BLOCK = re.compile(r"(<!-- BEGIN (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- END (?P=name) -->)",
                    re.S)


def _cell(text: str | None) -> str:
    if text is None or text == "":
        return "(unset)"
    return "`" + text.replace("|", "\\|") + "`"


def _default(key: ConfigKey) -> str:
    text = key.default_text
    return _cell(text if text is None or len(text) <= 60 else text[:57] + "...")


def _kafka_default(name: str, key: ConfigKey) -> str:
    kafka = KAFKA_BROKER_KEYS.get(name)
    if kafka is None or (kafka.default_text or "") == (key.default_text or ""):
        return ""
    return f" Kafka's default: {_cell(kafka.default_text)}."


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _here(key: ConfigKey) -> str:
    """The "here" column: honoured, or the no-effect marker with whether the value is kept."""
    mark = "honoured" if key.support is Support.HONOURED else (
        f"**accepted, no effect** ({key.support.value})")
    return mark + (f": {key.note}" if key.note else "")


def _honoured() -> str:
    rows = []
    for name, key in HONOURED_KEYS.items():
        aliases = [a for a, target in ALIASES.items() if target == name]
        notes = key.doc
        if aliases:
            notes += f" Alias: {', '.join(aliases)}."
        if key.note and key.note != "this broker's own key":
            notes += f" ({key.note})"
        notes += _kafka_default(name, key)
        dynamic = key.dynamic or "no"
        own = " (own)" if key.note == "this broker's own key" else ""
        rows.append([f"`{name}`{own}", _default(key), dynamic, notes.replace("|", "\\|")])
    return _table(["key", "default", "dynamic", "meaning"], rows)


def _topics() -> str:
    rows = []
    for name, topic in TOPIC_KEYS.items():
        key = topic.key
        synonyms = ", ".join(f"`{b}`" for b, _ in topic.synonyms) or "(none)"
        support = _here(key)
        if key.versions:
            support += f" (Kafka {key.versions} only)"
        valid = key.validator.describe() if key.validator else ""
        rows.append([f"`{name}`", _default(key), _cell(valid) if valid else "", synonyms,
                     support, key.doc.replace("|", "\\|")])
    return _table(["topic config", "default", "valid values", "broker synonyms", "here",
                   "meaning"], rows)


def _topic_defaults() -> str:
    synonyms = {b for topic in TOPIC_KEYS.values() for b, _ in topic.synonyms}
    rows = []
    for name, key in BROKER_KEYS.items():
        if name in HONOURED_KEYS or name not in synonyms or key.support is Support.IGNORED:
            continue
        rows.append([f"`{name}`", _default(key), _here(key), key.dynamic or "no",
                     key.doc.replace("|", "\\|")])
    return _table(["key", "default", "here", "dynamic", "meaning"], rows)


def _ignored() -> str:
    parts = []
    for area in AREAS:
        rows = []
        for name, key in BROKER_KEYS.items():
            if key.support is not Support.IGNORED or key.doc.split(" setting")[0] != (
                    f"Kafka's {area}"):
                continue
            valid = key.validator.describe() if key.validator else ""
            notes = []
            if key.versions:
                notes.append(f"Kafka {key.versions} only")
            if key.internal:
                notes.append("internal")
            if key.dynamic:
                notes.append(f"dynamic ({key.dynamic})")
            rows.append([f"`{name}`", key.type.name.lower(), _default(key),
                         _cell(valid) if valid else "", ", ".join(notes)])
        if rows:
            parts.append(f"**{area}**\n\n" + _table(
                ["key", "type", "Kafka's default", "valid values", "notes"], rows))
    return "\n".join(parts)


def sections() -> dict[str, Callable[[], str]]:
    """Marker name -> the function that renders that table."""
    return {"honoured-keys": _honoured, "topic-configs": _topics,
            "topic-default-keys": _topic_defaults, "ignored-keys": _ignored}


def render_document(text: str) -> str:
    """``text`` with every marked block replaced by its generated table."""
    renderers = sections()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in renderers:
            return match.group(0)
        return match.group(1) + renderers[name]() + match.group(4)

    return _BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DOC
    text = path.read_text(encoding="utf-8")
    new = render_document(text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
