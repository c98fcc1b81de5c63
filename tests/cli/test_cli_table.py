"""The command table: lazy loading, one error form, and Spark missing as one line."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from trio_broker.cli import COMMANDS, Tool, build_parser, main


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)


def test_every_command_loads_a_tool_and_lists_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for name, command in COMMANDS.items():
        assert isinstance(command.load(), Tool), name
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for name, command in COMMANDS.items():
        assert name in out
        assert command.help in out


@pytest.mark.parametrize("argv", [["--help"], ["serve", "--help"]])
def test_help_and_serve_import_no_client_tool_and_no_spark(argv: list[str]) -> None:
    code = ("import contextlib, io, sys\n"
            "from trio_broker.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            f"    main({argv!r})\n"
            "loaded = sorted(m for m in sys.modules if m.startswith(('trio_broker.cli.',\n"
            "    'trio_broker.spark', 'trio_broker.client.blocking', 'pyspark')))\n"
            "print(' '.join(loaded))\n")
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
    expected = {"trio_broker.cli.base"} | ({"trio_broker.cli.serve"} if "serve" in argv else set())
    assert set(done.stdout.split()) == expected


def test_a_client_tool_imports_the_blocking_client_and_not_the_trio_one() -> None:
    """Every command pays for its imports at each start: the blocking client's parent package
    must not load the Trio client behind its public names."""
    code = ("import contextlib, io, sys\n"
            "from trio_broker.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['topics', 'list', '--help'])\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(\n"
            "    ('trio_broker.client.trio.', 'trio_broker.client.blocking')))))\n"
            "from trio_broker.client import Producer, open_consumer\n"
            "print(Producer.__module__, open_consumer.__module__)\n")
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
    loaded, names = done.stdout.splitlines()
    assert "trio_broker.client.blocking" in loaded.split()
    assert not [m for m in loaded.split() if m.startswith("trio_broker.client.trio.")
                and m != "trio_broker.client.trio.errors"]
    assert names.split() == ["trio_broker.client.trio.producer.producer",
                             "trio_broker.client.trio.consumer.consumer"]


def test_unknown_option_is_argparse_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser("topics").parse_args(["topics", "list", "--no-such-option"])
    assert exited.value.code == 2
    assert "trio-broker: error: unrecognized arguments: --no-such-option" in (
        capsys.readouterr().err)


@pytest.mark.parametrize(("command", "path_option"), [("export", "--out"), ("import", "--in")])
def test_spark_commands_without_spark_say_how_to_install(tmp_path: object, command: str,
                                                         path_option: str) -> None:
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "from trio_broker.cli import main\n"
            f"sys.exit(main([{command!r}, '--bootstrap-server', '127.0.0.1:1', '--topic', 't',\n"
            f"                {path_option!r}, {str(tmp_path)!r}]))\n")
    done = _run_python(code)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"trio-broker {command}: error: this command needs Spark")
    assert "pip install 'trio-broker[spark]'" in done.stderr


#: Kafka's tools' option names (and kcat's where Kafka has none), as each --help must show them
KAFKA_OPTIONS: dict[tuple[str, ...], list[str]] = {
    ("topics", "create"): ["--partitions", "--replication-factor", "--config",
                           "--if-not-exists"],
    ("topics", "list"): ["--output"],
    ("topics", "describe"): ["--topic", "--output"],
    ("topics", "alter"): ["--partitions", "--config", "--delete-config"],
    ("topics", "delete"): ["--if-exists"],
    ("configs", "describe"): ["--entity-type", "--entity-name", "--entity-default", "--all",
                              "--topic", "--broker", "--broker-defaults", "--output"],
    ("configs", "alter"): ["--add-config", "--delete-config", "--entity-type", "--entity-name",
                           "--entity-default"],
    ("produce",): ["--topic", "--property", "--header", "--producer.config",
                   "--producer-property", "--request-required-acks", "--compression-codec",
                   "--request-timeout-ms"],
    ("consume",): ["--topic", "--group", "--from-beginning", "--partition", "--offset",
                   "--from-timestamp", "--format", "--output", "--exit-at-end",
                   "--max-messages", "--timeout-ms", "--property", "--consumer.config",
                   "--consumer-property", "--reconnect-timeout-ms"],
    ("groups", "list"): ["--state", "--output"],
    ("groups", "describe"): ["--group", "--all-groups", "--members", "--state", "--offsets",
                             "--output"],
    ("groups", "reset-offsets"): ["--group", "--all-groups", "--topic", "--all-topics",
                                  "--to-earliest", "--to-latest", "--to-current",
                                  "--to-datetime", "--by-duration", "--shift-by", "--to-offset",
                                  "--from-file", "--dry-run", "--execute", "--export",
                                  "--output"],
    ("groups", "delete"): ["--group", "--all-groups"],
    ("groups", "delete-offsets"): ["--group", "--topic", "--output"],
    # kafka-share-groups.sh's options
    ("share-groups", "list"): ["--state", "--output"],
    ("share-groups", "describe"): ["--group", "--all-groups", "--members", "--state",
                                   "--offsets", "--output"],
    ("share-groups", "reset-offsets"): ["--group", "--topic", "--all-topics", "--to-earliest",
                                        "--to-latest", "--to-datetime", "--dry-run",
                                        "--execute", "--output"],
    ("share-groups", "delete"): ["--group", "--all-groups"],
    ("share-groups", "delete-offsets"): ["--group", "--topic", "--output"],
    ("delete-records",): ["--offset-json-file", "--topic", "--partition", "--offset",
                          "--output"],
    ("cluster", "describe"): ["--output"],
    ("cluster", "api-versions"): ["--output"],
    ("dump-log",): ["--files", "--print-data-log"],
}

#: the commands that talk to a broker: each reaches TLS and SASL listeners the Kafka way
CLIENT_OPTIONS = ["--bootstrap-server", "--command-config", "-X"]
OFFLINE = {("dump-log",)}


def _help_of(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> tuple[str, set[str]]:
    """``command``'s --help text and the option strings its parser accepts."""
    with pytest.raises(SystemExit) as exited:
        build_parser(command[0]).parse_args([*command, "--help"])
    assert exited.value.code == 0
    parser = build_parser(command[0])
    for name in command:  # walk down to the command's own parser
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    accepted = {o for a in parser._actions if a.help != argparse.SUPPRESS
                for o in a.option_strings}
    return capsys.readouterr().out, accepted


@pytest.mark.parametrize("command", sorted(KAFKA_OPTIONS), ids=" ".join)
def test_help_shows_kafkas_option_names(command: tuple[str, ...],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    shown, accepted = _help_of(command, capsys)
    expected = KAFKA_OPTIONS[command] + ([] if command in OFFLINE else CLIENT_OPTIONS)
    for option in expected:
        assert option in accepted, option
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w.-])", shown), option


def test_the_option_table_names_real_commands() -> None:
    assert {c[0] for c in KAFKA_OPTIONS} <= set(COMMANDS)


def test_version_at_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    from trio_broker import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"trio-broker {__version__}\n"
