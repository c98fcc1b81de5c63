"""The console's guards in the browser and on the wire: read-only mode, SASL logins with the
broker's own users (over TLS too), CSRF and origin checks, the loopback Host check, HTTPS."""

from __future__ import annotations

import http.client
import logging
import re
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient
from playwright.sync_api import Page, expect

from tests.security_files import TlsFiles, password
from trio_broker.broker.http.sessions import MAX_SESSIONS_PER_USER
from trio_broker.broker.security import add_user
from trio_broker.testing import ThreadedBroker

from .conftest import console_broker, console_url, shoot

#: the login form's CSRF token (not the logout form's, shown once logged in)
LOGIN_TOKEN = re.compile(r'id="login-form".*?name="csrf" value="([^"]+)"', re.DOTALL)


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedBroker]:
    started = console_broker(tmp_path_factory.mktemp("read-only"), http_console_read_only=True)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory, users_file: Path,
         ) -> Iterator[ThreadedBroker]:
    started = console_broker(tmp_path_factory.mktemp("sasl"),
                             listeners="SASL_PLAINTEXT://127.0.0.1:0",
                             sasl_credentials_file=str(users_file),
                             connection_failed_authentication_delay_ms=10)
    try:
        yield started
    finally:
        started.stop()


def test_read_only_refuses_writes(page: Page, read_only: ThreadedBroker,
                                  caplog: pytest.LogCaptureFixture) -> None:
    url = console_url(read_only)
    read_only.create_topic("kept", 1)
    page.goto(f"{url}/topics/kept/messages")
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#produce-form")).to_have_count(0)
    page.goto(f"{url}/topics")
    expect(page.locator("#create-topic")).to_have_count(0)
    page.goto(f"{url}/topics/kept")
    expect(page.locator("#delete-topic")).to_have_count(0)
    with caplog.at_level(logging.INFO, logger="trio_broker.broker.http.audit"):
        for path, form in (("/topics", {"name": "sneaky"}), ("/topics/kept/delete", {}),
                           ("/topics/kept/produce", {"value": "x"})):
            answer = page.request.post(url + path, form=form, max_redirects=0)
            assert answer.status == 403
            assert "read-only" in answer.text()
    assert sum("refused (the console is read-only" in r.message for r in caplog.records) == 3
    topics = AdminClient({"bootstrap.servers": read_only.bootstrap_servers}).list_topics(
        timeout=10).topics
    assert "sneaky" not in topics
    assert "kept" in topics


def test_writes_need_the_forms_token_and_origin(page: Page, broker: ThreadedBroker) -> None:
    url = console_url(broker)
    page.goto(f"{url}/topics")
    token = page.locator('#create-topic input[name="csrf"]').get_attribute("value")
    assert token
    no_token = page.request.post(f"{url}/topics", form={"name": "forged"}, max_redirects=0)
    assert no_token.status == 403
    assert "CSRF" in no_token.text()
    other_site = page.request.post(f"{url}/topics", form={"name": "forged", "csrf": token},
                                   headers={"Origin": "http://evil.example"}, max_redirects=0)
    assert other_site.status == 403
    assert "cross-origin" in other_site.text()
    good = page.request.post(f"{url}/topics", form={"name": "allowed", "csrf": token},
                             max_redirects=0)
    assert good.status == 303
    topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
        timeout=10).topics
    assert "forged" not in topics
    assert "allowed" in topics


def test_a_loopback_console_answers_loopback_names_only(broker: ThreadedBroker) -> None:
    assert broker.broker is not None
    assert broker.broker.http_address is not None
    host, port = broker.broker.http_address
    for name, status in (("evil.example", 421), (f"127.0.0.1:{port}", 200),
                         (f"localhost:{port}", 200)):
        conn = http.client.HTTPConnection(host, port, timeout=10)
        try:
            conn.putrequest("GET", "/static/console.css", skip_host=True)
            conn.putheader("Host", name)
            conn.endheaders()
            answer = conn.getresponse()
            assert answer.status == status, name
            assert answer.getheader("X-Frame-Options") == "DENY" or status == 421
        finally:
            conn.close()


def _status_for_host(address: tuple[str, int], host_header: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", address[1], timeout=10)
    try:
        conn.putrequest("GET", "/static/console.css", skip_host=True)
        conn.putheader("Host", host_header)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_console_beyond_loopback_answers_its_own_names_only(tmp_path: Path) -> None:
    """Bound to every interface, the console still refuses a Host of another name (DNS
    rebinding: the page's Origin would equal that Host), and answers loopback, the address it
    was reached on, and the names in ``http.allowed.hosts``."""
    broker = console_broker(tmp_path, http_listener="http://0.0.0.0:0",
                            http_allowed_hosts="kafka-console.internal")
    try:
        assert broker.broker is not None
        address = broker.broker.http_address
        assert address is not None
        port = address[1]
        for host, status in ((f"rebind.evil.example:{port}", 421), ("rebind.evil.example", 421),
                             (f"0.0.0.0:{port}", 421), (f"10.9.8.7:{port}", 421),
                             (f"127.0.0.1:{port}", 200), (f"localhost:{port}", 200),
                             (f"kafka-console.internal:{port}", 200),
                             ("Kafka-Console.Internal.", 200)):
            assert _status_for_host(address, host) == status, host
    finally:
        broker.stop()


def test_sasl_login_with_the_brokers_users(page: Page, sasl: ThreadedBroker,
                                           caplog: pytest.LogCaptureFixture) -> None:
    url = console_url(sasl)
    assert page.request.get(f"{url}/api/live").status == 401
    page.goto(f"{url}/topics")
    expect(page).to_have_url(f"{url}/login?next=%2Ftopics")
    page.fill('input[name="username"]', "alice")
    page.fill('input[name="password"]', "wrong-password")
    page.click("#login-form button")
    expect(page.locator("#login-error")).to_contain_text("Authentication failed")
    assert page.context.cookies(url) == []
    shoot(page, "login")
    page.fill('input[name="password"]', password("alice"))
    page.select_option('select[name="mechanism"]', "SCRAM-SHA-256")
    page.click("#login-form button")
    expect(page).to_have_url(f"{url}/topics")
    expect(page.locator("#user")).to_have_text("alice")
    with caplog.at_level(logging.INFO, logger="trio_broker.broker.http.audit"):
        page.locator("#create-topic summary").click()
        page.fill('#create-topic input[name="name"]', "alices-topic")
        page.click("#create-topic button")
        expect(page.locator("#flash")).to_have_text("created topic alices-topic")
    assert any("user=alice" in r.message and "create topic 'alices-topic'" in r.message
               for r in caplog.records)
    page.click("header form button")  # log out
    expect(page).to_have_url(f"{url}/login")
    page.goto(f"{url}/")
    expect(page).to_have_url(f"{url}/login?next=%2F")


def test_sasl_ssl_console_trusts_its_own_certificate(page: Page, tls_files: TlsFiles,
                                                     users_file: Path, tmp_path: Path) -> None:
    """Over SASL_SSL the console's client checks the broker's own certificate (which is not
    self-signed: a partial chain), and HTTPS serves the pages with the same certificate."""
    broker = console_broker(tmp_path, listeners="SASL_SSL://127.0.0.1:0",
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            http_listener="https://127.0.0.1:0")
    try:
        url = console_url(broker).replace("http://", "https://")
        context = ssl.create_default_context(cafile=str(tls_files.ca_pem))
        with urllib.request.urlopen(f"{url}/login", context=context, timeout=10) as answer:
            assert answer.status == 200
            assert "Log in" in answer.read().decode()
        form = page.request.get(f"{url}/login", ignore_https_errors=True).text()
        token = LOGIN_TOKEN.search(form)
        assert token is not None
        login = page.request.post(f"{url}/login", form={
            "username": "bob", "password": password("bob"), "mechanism": "SCRAM-SHA-512",
            "next": "/topics", "csrf": token.group(1)}, max_redirects=0,
            ignore_https_errors=True)
        assert login.status == 303, login.text()
        assert login.headers["location"] == "/topics"
        assert "secure" in login.headers["set-cookie"].lower()
        form = page.request.get(f"{url}/login", ignore_https_errors=True).text()
        token = LOGIN_TOKEN.search(form)
        assert token is not None
        refused = page.request.post(f"{url}/login", form={
            "username": "bob", "password": "nope", "mechanism": "PLAIN",
            "csrf": token.group(1)}, max_redirects=0, ignore_https_errors=True)
        assert refused.status == 401
        assert "Authentication failed" in refused.text()
    finally:
        broker.stop()


def _tls_principals(caplog: pytest.LogCaptureFixture) -> list[str | None]:
    return [r.args[-1] for r in caplog.records  # type: ignore[index]
            if "TLS principal" in r.getMessage()]


def _get(broker: ThreadedBroker, path: str) -> tuple[int, str]:
    url = console_url(broker)
    with urllib.request.urlopen(url + path, timeout=30) as answer:
        return answer.status, answer.read().decode()


def test_a_tls_console_presents_only_its_own_certificate(tls_files: TlsFiles, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture,
                                                         ) -> None:
    """With client certificates asked for, the console's client never presents the broker's
    ``ssl.certfile`` (every visitor would act as the broker); it presents
    ``http.console.ssl.certfile`` when set, and none otherwise."""
    keys = {"listeners": "SSL://127.0.0.1:0", "ssl_certfile": str(tls_files.server_pem),
            "ssl_cafile": str(tls_files.ca_pem), "ssl_client_auth": "requested",
            "http_console_enabled": True}
    caplog.set_level(logging.INFO, logger="trio_broker.broker.http")
    # last: caplog's handler takes the level of the latest call
    caplog.set_level(logging.DEBUG, logger="trio_broker.broker.network.processor")
    broker = console_broker(tmp_path / "bare", **keys)
    try:
        broker.create_topic("shown", 1)
        status, body = _get(broker, "/topics")
        assert status == 200
        assert "shown" in body
        assert set(_tls_principals(caplog)) == {None}  # not the broker's own principal
        assert any("presents no certificate" in r.getMessage() for r in caplog.records)
    finally:
        broker.stop()
    caplog.clear()
    broker = console_broker(tmp_path / "given", **keys,
                            http_console_ssl_certfile=str(tls_files.client_pem))
    try:
        broker.create_topic("shown", 1)
        status, body = _get(broker, "/topics")
        assert "shown" in body
        assert not any("presents no certificate" in r.getMessage() for r in caplog.records)
    finally:
        broker.stop()
    principals = set(_tls_principals(caplog))
    assert len(principals) == 1
    assert principals.pop().startswith("User:CN=client-one,")  # type: ignore[union-attr]


def _login_token(client: httpx.Client, url: str) -> str:
    """The login form's CSRF token (its cookie lands in ``client``'s jar)."""
    form = client.get(f"{url}/login")
    assert form.status_code == 200
    match = LOGIN_TOKEN.search(form.text)
    assert match is not None, "the login form carries no CSRF token"
    return match.group(1)


def _login(client: httpx.Client, url: str, user: str, csrf: str | None = "from the form",
           headers: dict[str, str] | None = None) -> httpx.Response:
    """One login form post, the token fetched first unless ``csrf`` says otherwise."""
    token = _login_token(client, url) if csrf == "from the form" else csrf
    form = {"username": user, "password": password(user), "mechanism": "PLAIN", "next": "/"}
    if token is not None:
        form["csrf"] = token
    return client.post(f"{url}/login", data=form, headers=headers)


def _from(address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (every 127/8 address is this host's)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def _logged_in(client: httpx.Client, url: str) -> bool:
    return client.get(f"{url}/topics").status_code == 200


def test_login_needs_its_csrf_token_and_refuses_other_sites(users_file: Path,
                                                             tmp_path: Path) -> None:
    broker = console_broker(tmp_path, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            sasl_credentials_file=str(users_file),
                            connection_failed_authentication_delay_ms=10)
    try:
        url = console_url(broker)
        origin = url.rstrip("/")
        with _from("127.0.0.1") as client:
            # login CSRF: another site's page must not log the visitor in as someone else
            for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                            {"Origin": origin, "Sec-Fetch-Site": "cross-site"}):
                refused = _login(client, url, "alice", headers=headers)
                assert refused.status_code == 403, headers
                assert "trio_broker_console" not in refused.cookies
            # a post without the form's token (an old browser sends no Origin), or with one
            # that is not the cookie's, is refused too
            for token in (None, "", "forged-token"):
                refused = _login(client, url, "alice", csrf=token)
                assert refused.status_code == 403, token
                assert "CSRF" in refused.text
                assert "trio_broker_console" not in refused.cookies
            client.cookies.clear()
            token = _login_token(client, url)
            client.cookies.clear()  # the token without its cookie
            assert _login(client, url, "alice", csrf=token).status_code == 403
            done = _login(client, url, "bob", headers={"Origin": origin,
                                                       "Sec-Fetch-Site": "same-origin"})
            assert done.status_code == 303
            assert done.headers["location"] == "/"
            assert _logged_in(client, url)
    finally:
        broker.stop()


def test_one_users_logins_never_evict_another_user(users_file: Path, tmp_path: Path) -> None:
    """alice logs in from more addresses than the console keeps sessions: bob stays logged in,
    and alice keeps only her newest sessions."""
    broker = console_broker(tmp_path, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            sasl_credentials_file=str(users_file),
                            connection_failed_authentication_delay_ms=10)
    try:
        url = console_url(broker)
        with _from("127.0.0.1") as bob:
            assert _login(bob, url, "bob").status_code == 303
            alices = []
            try:
                for n in range(100):
                    alice = _from(f"127.0.1.{n + 1}")
                    alices.append(alice)
                    assert _login(alice, url, "alice").status_code == 303
                assert _logged_in(bob, url)
                assert _logged_in(alices[-1], url)
                assert not _logged_in(alices[0], url)
                assert sum(_logged_in(a, url) for a in alices) == MAX_SESSIONS_PER_USER
            finally:
                for alice in alices:
                    alice.close()
    finally:
        broker.stop()


def test_a_full_console_refuses_a_new_user_rather_than_log_anyone_out(tmp_path: Path) -> None:
    """64 users hold one session each: a 65th user is answered 503 and every user stays logged
    in; a user who already holds a session logs in again by giving up their own."""
    users = [f"user-{n}" for n in range(65)]
    users_path = tmp_path / "users.json"
    for user in users:
        add_user(users_path, user, password(user), mechanisms=("SCRAM-SHA-256",))
    broker = console_broker(tmp_path / "data", listeners="SASL_PLAINTEXT://127.0.0.1:0",
                            sasl_credentials_file=str(users_path))
    url = console_url(broker)
    clients = [_from("127.0.0.1") for _ in users]
    try:
        for user, client in zip(users[:64], clients, strict=False):
            assert _login(client, url, user).status_code == 303
        full = _login(clients[64], url, users[64])
        assert full.status_code == 503
        assert "64 users logged in" in full.text
        assert all(_logged_in(client, url) for client in clients[:64])
        again = _from("127.0.0.1")
        try:
            assert _login(again, url, users[0]).status_code == 303
            assert _logged_in(again, url)
            assert not _logged_in(clients[0], url)  # user-0's older session made the room
            assert all(_logged_in(client, url) for client in clients[1:64])
        finally:
            again.close()
    finally:
        for client in clients:
            client.close()
        broker.stop()
