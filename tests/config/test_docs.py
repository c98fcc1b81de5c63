"""docs/configuration.md agrees with the key definitions it is generated from."""

from __future__ import annotations

from pathlib import Path

from trio_broker.broker.config.docgen import render_document, sections
from trio_broker.broker.config.keys import BROKER_KEYS
from trio_broker.broker.config.topic_keys import TOPIC_KEYS

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_generated_tables_are_current():
    text = DOC.read_text(encoding="utf-8")
    for name in sections():
        assert f"<!-- BEGIN {name} -->" in text, name
    assert render_document(text) == text, (
        "docs/configuration.md is out of date: run python -m trio_broker.broker.config.docgen")


def test_every_key_is_documented():
    text = DOC.read_text(encoding="utf-8")
    missing = [name for name in [*BROKER_KEYS, *TOPIC_KEYS] if f"`{name}`" not in text]
    assert not missing


def test_a_changed_definition_makes_the_check_fail():
    text = DOC.read_text(encoding="utf-8")
    stale = text.replace("| `num.partitions` | `1` |", "| `num.partitions` | `2` |")
    assert stale != text
    assert render_document(stale) != stale
