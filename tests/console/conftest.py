"""One headless Chromium for every console test, and brokers serving the console.

The browser is Debian's ``chromium`` driven by Playwright (``playwright install`` is not needed:
the system browser is launched by path). A missing browser fails the tests (``make test`` installs
it; ``apt-get install chromium`` does by hand): they are the console's proof, never skipped.

Every page the tests visit is screenshotted; the PNGs are written into ``docs/console/`` (which
docs/console.md shows) only when ``CONSOLE_SCREENSHOTS=1`` asks for it, so an ordinary run leaves
the checkout as it found it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
#: the screenshots docs/console.md shows, rewritten by a run with CONSOLE_SCREENSHOTS=1
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
WRITE_SHOTS = os.environ.get("CONSOLE_SCREENSHOTS", "") not in ("", "0")
VIEWPORT = {"width": 1100, "height": 720}


@pytest.fixture(scope="package")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM} (apt-get install chromium; make test does)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    # Package scope: Playwright's sync API runs an asyncio loop on greenlets in this thread, so
    # while it lives asyncio.run() refuses to start (aiokafka's tests) and Python 3.11's parser
    # can see a wrong recursion depth; it is stopped when the console's tests are done.
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport=VIEWPORT, device_scale_factor=1, timezone_id="UTC")
        context.set_default_timeout(15_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(chromium: BrowserContext) -> Iterator[Page]:
    """A fresh tab with no cookies; an exception in the console's script, or a failed request
    for an asset or a live-data endpoint, fails the test."""
    chromium.clear_cookies()
    tab = chromium.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("response", lambda response: problems.append(
        f"{response.status} for {response.url}") if response.status >= 400 and (
        "/static/" in response.url or "/api/" in response.url) else None)
    try:
        yield tab
    finally:
        tab.close()
    assert not problems, problems


def console_broker(tmp_path: Path, **settings: Any) -> ThreadedBroker:
    return ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                             "http_listener": "http://127.0.0.1:0", **settings}).start()


def console_url(broker: ThreadedBroker) -> str:
    assert broker.broker is not None
    assert broker.broker.http_address is not None
    host, port = broker.broker.http_address
    return f"http://{host}:{port}"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    """A read-write console on loopback (one per test module)."""
    started = console_broker(tmp_path_factory.mktemp("console"))
    try:
        yield started
    finally:
        started.stop()


def shoot(page: Page, name: str) -> None:
    """Screenshot the visible part of the page; write it to ``docs/console/<name>.png`` only when
    ``CONSOLE_SCREENSHOTS=1`` asks (the picture is taken either way, so a page that cannot be
    drawn fails every run)."""
    png = page.screenshot()
    assert png.startswith(b"\x89PNG"), f"{name}: not a PNG"
    assert len(png) > 1000, f"{name}: an empty picture"
    if WRITE_SHOTS:
        SHOTS.mkdir(parents=True, exist_ok=True)
        (SHOTS / f"{name}.png").write_bytes(png)
