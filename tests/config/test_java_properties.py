"""Java properties (server.properties, meta.properties) are read as Java's ``Properties.load``
reads them: checked against ``javaproperties`` (an implementation of the same algorithm) on
Java's documented examples and on generated text; an entry and an error name their line, and a
malformed stamp refuses the start as Kafka's does."""

from __future__ import annotations

import random
from pathlib import Path

import javaproperties
import pytest

from trio_broker.broker.config import ConfigError
from trio_broker.broker.config.java_properties import load_properties
from trio_broker.broker.config.loader import read_config_entries
from trio_broker.broker.storage.meta_properties import MetaPropertiesError, read_meta_properties

#: Properties.load's Javadoc examples, Properties.store's escapes, and the corners of the format
EXAMPLES = [
    "Truth = Beauty\n", "  Truth:Beauty\n", "Truth                    :Beauty\n",
    "fruits                           apple, banana, pear, \\\n"
    "                                  cantaloupe, watermelon, \\\n"
    "                                  kiwi, mango\n",
    "cheeses\n", "#comment\n! another\n  # indented comment \\\nkey=value\n",
    "key\\:with\\=escapes\\ and\\ blanks = v\\u00e9\\t\\n\\\\\n",
    "emoji=\\uD83D\\uDE00\nlone=\\uD800\n", "a=1\r\nb=2\rc=3\n", "a = = b\n", "a : : b\n",
    "continued=one\\\n\n#not a comment\n", "cont=x\\\n  #part of it\n", "last\\", "\\\n\\\n",
    "dup=1\ndup=2\n", "\\\\\\\nx\n", "key\\\\=value\n", "\f\tk\f=\fv\n",
    "#\n#Sun Nov 29 08:43:47 UTC 2026\ncluster.id=q1Sh-9_ISia_zwGINzRvyQ\nnode.id=1\nversion=1\n",
]
PIECES = ["a", "b", "key", " ", "\t", "\f", "=", ":", "#", "!", "\\", "\\", "\n", "\r", "\r\n",
          "u", "0", "D83D", "\\u00e9", "\\uD83D", "\\uDE00", "\\u12", "\\uZZZZ", "\\t", "\\=",
          "\\ ", "\u00e9"]


def _java(text: str) -> dict[str, str] | None:
    try:
        props: dict[str, str] = javaproperties.loads(text)
    except ValueError:
        return None
    return props


def _ours(text: str) -> dict[str, str] | None:
    try:
        return load_properties(text)
    except ValueError:
        return None


@pytest.mark.parametrize("text", EXAMPLES)
def test_documented_examples_read_as_java_reads_them(text: str) -> None:
    assert _ours(text) == _java(text)


def test_javadoc_values() -> None:
    assert load_properties(EXAMPLES[3]) == {
        "fruits": "apple, banana, pear, cantaloupe, watermelon, kiwi, mango"}
    assert load_properties(EXAMPLES[4]) == {"cheeses": ""}
    assert load_properties(EXAMPLES[7]) == {"emoji": "\U0001F600", "lone": "\ud800"}


def test_generated_text_reads_as_java_reads_it() -> None:
    rng = random.Random(2026)
    for _ in range(5000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 24)))
        assert _ours(text) == _java(text), repr(text)


def test_a_malformed_escape_refuses_the_stamp(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=\\u12zz\n",
                                              encoding="latin-1")
    with pytest.raises(MetaPropertiesError, match=r"Cannot read .*: Malformed \\uxxxx encoding"):
        read_meta_properties(tmp_path)


def test_a_server_properties_entry_and_error_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    text = "# a comment\n\nnum.partitions=3\nlog.dirs=/a,\\\n  /b\r\nnode.id 2\n"
    path.write_text(text)
    assert read_config_entries(path) == [("num.partitions", "3", f"{path}:3"),
                                         ("log.dirs", "/a,/b", f"{path}:4"),
                                         ("node.id", "2", f"{path}:6")]
    path.write_text(text + "! another comment\nbad=\\u12zz\n")
    with pytest.raises(ConfigError, match=r"server\.properties:8: cannot read Java properties: "
                                          r"Malformed \\uxxxx encoding"):
        read_config_entries(path)
