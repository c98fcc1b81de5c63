"""Every example in README.md and docs/cli.md, run against real brokers as a reader would run it.

``console`` blocks: each ``$ COMMAND`` (``\\`` continues it) runs in bash, in a fresh directory,
with ``trio-broker`` on PATH; ``127.0.0.1:9092`` is a plaintext broker and ``127.0.0.1:9093`` a
SASL_SSL one (users alice and bob, the CA in ``ca.pem``). The lines shown after a command must
appear in its output (stdout, then stderr), in order; ``...`` stands for any lines. A command
shown with an error line may fail; every other must succeed. ``$ cat FILE`` followed by lines
writes FILE first: the example shows the file it uses. ``python`` blocks run with the
interpreter of the base install and none of the dev extras importable: the README promises they
work after ``make serve`` alone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.broker_process import BrokerProcess, free_port
from tests.security_files import TlsFiles
from trio_broker.testing import ThreadedBroker

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
#: packages only the dev extras install: a README example must not need them
DEV_ONLY = ("confluent_kafka", "kafka", "aiokafka", "pytest", "hypothesis", "snappy", "lz4",
            "zstandard", "trustme", "pyspark", "pyarrow", "numpy")


@attrs.frozen
class Example:
    command: str
    expected: list[str]
    line: int


def blocks(path: Path, language: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, lines) of every fenced block of ``language``."""
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == f"```{language}":
            start = i + 1
            i += 1
            while lines[i].strip() != "```":
                i += 1
            yield start + 1, [line.rstrip() for line in lines[start:i]]
        i += 1


def examples(path: Path) -> list[list[Example]]:
    """The ``console`` blocks of ``path`` as lists of commands with their shown output."""
    out = []
    for first, lines in blocks(path, "console"):
        found: list[Example] = []
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                raise AssertionError(f"{path.name}:{first + i}: output before a command")
            command, number = lines[i][2:], first + i
            while command.endswith("\\"):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            i += 1
            expected = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            found.append(Example(command, expected, number))
        out.append(found)
    return out


def shown_in_order(expected: list[str], actual: list[str]) -> bool:
    """Every shown line is in ``actual`` in order; ``...`` skips any number of lines."""
    pattern = "".join(r"(?:[^\n]*\n)*?" if e.strip() == "..." else
                      "^" + re.escape(e.rstrip()) + r"\n" for e in expected)
    return re.search(pattern, "".join(a.rstrip() + "\n" for a in actual), re.M) is not None


@pytest.fixture
def readers_machine(tmp_path: Path, tls_files: TlsFiles,
                    users_file: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A reader's directory (with ``data`` the plaintext broker's log dir) and the
    substitutions for the brokers the examples name."""
    plain = BrokerProcess(tmp_path / "data").start()
    secure = ThreadedBroker(listeners="SASL_SSL://127.0.0.1:0",
                            log_dirs=str(tmp_path / "secure-data"),
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            sasl_enabled_mechanisms="PLAIN,SCRAM-SHA-256",
                            connection_failed_authentication_delay_ms=0,
                            group_initial_rebalance_delay_ms=0,
                            shutdown_timeout_ms=1000).start()
    shutil.copy(tls_files.ca_pem, tmp_path / "ca.pem")
    try:
        yield tmp_path, {"127.0.0.1:9092": plain.bootstrap_servers,
                         "127.0.0.1:9093": secure.bootstrap_servers}
    finally:
        secure.stop()
        plain.stop()


def run_examples(path: Path, cwd: Path, addresses: dict[str, str]) -> int:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "80"}
    ran = 0
    for block in examples(path):
        for example in block:
            where = f"{path.name}:{example.line}: $ {example.command}"
            name = re.fullmatch(r"cat (\S+)", example.command)
            if name:  # the example shows the file it uses
                (cwd / name.group(1)).write_text("".join(f"{x}\n" for x in example.expected))
            command = example.command.replace(".venv/bin/", f"{BIN}/")
            for shown, real in addresses.items():
                command = command.replace(shown, real)
            # 280 s: the first `trio-broker export` on a machine also writes Spark's class
            # archive (22 s on an idle machine, over 120 s on a loaded one); a guard, not a target
            done = subprocess.run(["bash", "-c", "set -o pipefail; " + command], cwd=cwd,
                                  env=env, capture_output=True, text=True, timeout=280,
                                  check=False)
            actual = done.stdout.splitlines() + done.stderr.splitlines()
            expected = [_unaddress(e, addresses) for e in example.expected]
            fails = any(": error: " in e for e in expected)
            assert fails or done.returncode == 0, f"{where}\n{done.stdout}{done.stderr}"
            assert "Traceback" not in done.stderr, where
            assert shown_in_order(expected, actual), (
                f"{where}\nshown:\n" + "\n".join(expected) + "\nactual:\n" + "\n".join(actual))
            ran += 1
    return ran


def _unaddress(line: str, addresses: dict[str, str]) -> str:
    for shown, real in addresses.items():
        line = line.replace(shown, real)
    return line


@pytest.mark.timeout(600)  # the first export writes Spark's class archive (see run_examples)
def test_every_cli_md_example_runs(readers_machine):
    cwd, addresses = readers_machine
    assert run_examples(ROOT / "docs" / "cli.md", cwd, addresses) >= 40


def _serve_recipe() -> list[str]:
    """``make serve``'s command line, from the Makefile."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipe = lines[lines.index(next(x for x in lines if x.startswith("serve:"))) + 1].strip()
    return recipe.replace("$(VENV)/bin/", f"{BIN}/").split()


def test_every_readme_example_runs_after_make_serve_alone(tmp_path):
    """The broker as ``make serve`` runs it (its port moved off 9092), then the README's
    console and Python examples, with nothing of the dev extras importable."""
    recipe = _serve_recipe()
    assert recipe[1:3] == ["serve", "--override"]
    assert "listeners=PLAINTEXT://127.0.0.1:9092" in recipe
    port = free_port()
    args = [a.replace(":9092", f":{port}").replace("./data", str(tmp_path / "data"))
            for a in recipe]
    broker = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert broker.stdout is not None
        for line in broker.stdout:
            if "listening on" in line:
                break
        addresses = {"127.0.0.1:9092": f"127.0.0.1:{port}"}
        ran = run_examples(ROOT / "README.md", tmp_path, addresses)
        block_guard = "".join(f"sys.modules[{m!r}] = None\n" for m in DEV_ONLY)
        snippets = [code for _, code in blocks(ROOT / "README.md", "python")]
        assert snippets
        for i, lines in enumerate(snippets):
            code = textwrap.dedent("\n".join(lines)).replace("127.0.0.1:9092", f"127.0.0.1:{port}")
            code = code.replace("/tmp/broker-data", str(tmp_path / f"embedded-{i}"))
            done = subprocess.run([sys.executable, "-c", "import sys\n" + block_guard + code],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=120,
                                  check=False)
            assert done.returncode == 0, f"README python block {i}:\n{done.stderr}"
            ran += 1
        assert ran >= 3
    finally:
        broker.terminate()
        broker.wait(30)
