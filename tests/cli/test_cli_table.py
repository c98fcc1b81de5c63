"""The command table: lazy loading, one error form, and Spark missing as one line."""

from __future__ import annotations

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
            "    'trio_broker.spark', 'trio_broker.blocking_client', 'pyspark')))\n"
            "print(' '.join(loaded))\n")
    done = _run_python(code)
    assert done.returncode == 0, done.stderr
    expected = {"trio_broker.cli.base"} | ({"trio_broker.cli.serve"} if "serve" in argv else set())
    assert set(done.stdout.split()) == expected


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
