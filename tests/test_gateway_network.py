"""The gateway's network policy, tried as someone on the network would: a bind beyond loopback with no
token refuses to start; with a token, every route wants it (compared in constant time); with none,
only loopback peers are served, so session contents never reach a caller who could not have sent
them; the admin routes answer any session id with a JSON 400/404, never a 500."""

from __future__ import annotations

import ipaddress
import json
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, note, settings, strategies as st
from typer.testing import CliRunner

from gateway_helpers import InProcess, inprocess_gateway
from worksurface.cli import app as cli
from worksurface.core.errors import ConfigError
from worksurface.gateway import GatewayConfig, load_config, serve
from worksurface.gateway.config import ExposedGatewayError, TOKEN_VARIABLE, is_loopback

TOKEN = "gw-token-0123456789abcdef"
SECRET_TEXT = "the launch code is 7391"
ANTHROPIC = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": SECRET_TEXT}]}
CHAT = {"model": "m", "messages": [{"role": "user", "content": SECRET_TEXT}]}
RESPONSES = {"model": "m", "input": [{"role": "user", "content": SECRET_TEXT}]}
# Every route but /healthz, with a body where it takes one.
ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/messages", ANTHROPIC), ("POST", "/v1/messages/count_tokens", ANTHROPIC),
    ("POST", "/v1/chat/completions", CHAT), ("POST", "/chat/completions", CHAT),
    ("POST", "/v1/responses", RESPONSES), ("POST", "/responses", RESPONSES),
    ("GET", "/sessions", None), ("GET", "/sessions/a-0123456789abcdef0123", None),
    ("DELETE", "/sessions/a-0123456789abcdef0123", None), ("GET", "/metrics", None),
    ("GET", "/v1/models", None), ("POST", "/v1/anything/else", {"x": 1}),
]
HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def ok(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/responses"):
        return httpx.Response(200, json={"id": "r", "output": [], "usage": {"input_tokens": 3}})
    if "chat" in request.url.path:
        return httpx.Response(200, json={"choices": [], "usage": {"prompt_tokens": 3}})
    return httpx.Response(200, json={"type": "message", "content": [], "usage": {"input_tokens": 3}})


def call(gw: InProcess, method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    response: httpx.Response = gw.client.request(method, path, json=body, headers={**HEADERS, **(headers or {})})
    return response


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with inprocess_gateway(tmp_path_factory.mktemp("guarded"), ok, token=TOKEN) as gw:
        yield gw


# --- binding ---------------------------------------------------------------------------------------

@given(st.ip_addresses())
def test_only_loopback_addresses_count_as_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    expected = address.is_loopback or (isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None
                                       and address.ipv4_mapped.is_loopback)
    assert is_loopback(str(address)) is expected
    assert is_loopback(f"[{address}]") is expected


@pytest.mark.parametrize("host", ["localhost.attacker.example", "127.0.0.1.nip.io", "0.0.0.0", "::", "", "*",
                                  "example.com", "10.0.0.1", "127.0.0.1 ", "localhost:80"])
def test_names_and_wildcards_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ExposedGatewayError, match=TOKEN_VARIABLE):
        load_config(host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_needs_no_token(host: str) -> None:
    assert load_config(host=host).host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20"])
def test_serve_beyond_loopback_without_a_token_refuses_to_start_in_one_line(host: str, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    result = CliRunner().invoke(cli, ["serve", "--host", host, "--port", "0", "--store", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--host" in lines[0] and TOKEN_VARIABLE in lines[0], result.output
    assert "Traceback" not in result.output


def test_a_token_from_the_environment_or_the_config_file_allows_any_address(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, TOKEN)
    assert load_config(host="0.0.0.0").token == TOKEN
    monkeypatch.delenv(TOKEN_VARIABLE)
    toml = tmp_path / "gw.toml"
    toml.write_text(f'host = "0.0.0.0"\ntoken = "{TOKEN}"\n', encoding="utf-8")
    assert load_config(toml).host == "0.0.0.0"
    toml.write_text('host = "0.0.0.0"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=TOKEN_VARIABLE):
        load_config(toml)


def test_the_library_serve_refuses_before_anything_listens(tmp_path: Path) -> None:
    with pytest.raises(ExposedGatewayError):
        serve(GatewayConfig(store=str(tmp_path), host="0.0.0.0", port=0))


# --- the token -------------------------------------------------------------------------------------

@pytest.mark.parametrize("method,path,body", ROUTES)
def test_every_route_wants_the_token(guarded: InProcess, method: str, path: str, body: Any) -> None:
    before = len(guarded.seen)
    for headers in ({}, {"x-worksurface-token": TOKEN[:-1]}, {"x-worksurface-token": TOKEN + "x"},
                    {"x-worksurface-token": TOKEN.upper()}, {"proxy-authorization": f"Basic {TOKEN}"},
                    {"authorization": f"Bearer {TOKEN}"}, {"x-worksurface-token": ""}):
        r = call(guarded, method, path, body, headers)
        assert r.status_code == 401, (path, headers)
        assert r.json()["error"]["type"] == "authentication_error"
        assert SECRET_TEXT not in r.text
    assert len(guarded.seen) == before, "nothing went upstream without the token"
    for headers in ({"x-worksurface-token": TOKEN}, {"proxy-authorization": f"Bearer {TOKEN}"},
                    {"proxy-authorization": f"bearer {TOKEN}"}):
        r = call(guarded, method, path, body, headers)
        assert r.status_code != 401 and r.status_code < 500, (path, r.status_code, r.text)
    for sent in guarded.seen[before:]:
        assert TOKEN not in json.dumps(dict(sent.headers)), "the gateway's token is never sent on"
    assert guarded.client.get("/healthz").status_code == 200


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=60))
def test_no_other_token_is_accepted(guarded: InProcess, given_token: str) -> None:
    r = guarded.client.get("/sessions", headers={"x-worksurface-token": given_token})
    assert r.status_code == (200 if given_token == TOKEN else 401)


def test_the_token_is_compared_in_constant_time(guarded: InProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check goes through hmac.compare_digest over equal-length digests (no early exit on a
    prefix, no length shown)."""
    import worksurface.gateway.app as app_module

    compared: list[tuple[int, int]] = []
    real = app_module.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(app_module.hmac, "compare_digest", spy)
    for method, path, body in ROUTES:
        call(guarded, method, path, body, {"x-worksurface-token": "x" * 5})
    assert len(compared) == len(ROUTES)
    assert all(a == b for a, b in compared)


# --- no token: loopback peers only ------------------------------------------------------------------

@pytest.mark.parametrize("peer", ["10.0.0.7", "192.168.1.50", "2001:db8::1", "testclient", "0.0.0.0"])
def test_without_a_token_only_loopback_peers_are_served(tmp_path: Path, peer: str) -> None:
    with inprocess_gateway(tmp_path, ok) as local:
        r = call(local, "POST", "/v1/messages", ANTHROPIC)
        assert r.status_code == 200
        session = r.headers["x-worksurface-session"]
        detail = local.client.get(f"/sessions/{session}")
        assert detail.status_code == 200 and SECRET_TEXT in detail.text    # the one who sent it may read it
        forwarded = len(local.seen)
        remote = type(local.client)(local.client.app, client=(peer, 40000), raise_server_exceptions=False)
        for method, path, body in [*ROUTES, ("GET", f"/sessions/{session}", None)]:
            answer = remote.request(method, path, json=body, headers=HEADERS)
            assert answer.status_code == 403, (peer, path)
            assert answer.json()["error"]["type"] == "permission_error"
            assert TOKEN_VARIABLE in answer.json()["error"]["message"]
            assert SECRET_TEXT not in answer.text and session not in answer.text
        assert len(local.seen) == forwarded


# --- admin ids ---------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=120), st.sampled_from(["GET", "DELETE"]))
def test_any_session_id_is_answered_400_or_404_in_json(guarded: InProcess, session_id: str, method: str) -> None:
    assume(session_id not in (".", ".."))   # dot segments: the HTTP client resolves them before sending
    quoted = urllib.parse.quote(session_id.encode("utf-8", "surrogatepass"), safe="")
    before = len(guarded.seen)
    r = guarded.client.request(method, f"/sessions/{quoted}", headers={"x-worksurface-token": TOKEN})
    note(f"{r.status_code} {r.text[:200]}")
    if r.status_code == 200:        # an id some earlier example's request created
        return
    assert r.status_code in (400, 404), (session_id, r.status_code, r.text)
    assert r.json()["type"] == "error" and r.json()["error"]["message"]
    assert len(guarded.seen) == before, "an admin path never goes upstream"


@pytest.mark.parametrize("path", ["/sessions/..", "/sessions/a/b", "/sessions/%2e%2e%2fetc", "/sessions/%ED%A0%80",
                                  "/sessions/%00", "/sessions/" + "a" * 300, "/sessions/-lead"])
def test_hostile_session_paths_are_400_json(guarded: InProcess, path: str) -> None:
    for method in ("GET", "DELETE"):
        r = guarded.client.request(method, path, headers={"x-worksurface-token": TOKEN})
        if path == "/sessions/..":      # the client itself resolves the dot segment: /, passed through
            continue
        assert r.status_code == 400, (method, path, r.status_code, r.text)
        assert r.json()["error"]["type"] == "invalid_request_error"


def test_the_sessions_mark_key_is_never_served(tmp_path: Path) -> None:
    with inprocess_gateway(tmp_path, ok) as gw:
        session = call(gw, "POST", "/v1/messages", ANTHROPIC).headers["x-worksurface-session"]
        entry = gw.gateway.registry.find(session)
        assert entry is not None and len(entry.mark_key) == 32
        served = gw.client.get(f"/sessions/{session}").text + gw.client.get("/sessions").text
        assert entry.mark_key.hex() not in served
        info = tmp_path / session / "gateway.json"
        assert info.stat().st_mode & 0o077 == 0, "the file holding the key is the user's alone"


def test_behind_a_local_reverse_proxy_the_forwarded_peer_is_the_one_checked(tmp_path: Path) -> None:
    """Over a real socket: a reverse proxy on this machine that names the remote caller
    (X-Forwarded-For, which uvicorn trusts from loopback) gets that caller refused without a token."""
    from fake_anthropic import FakeAnthropic
    from gateway_helpers import running_gateway

    with FakeAnthropic() as fake, running_gateway(tmp_path, fake.url) as gw:
        local = httpx.post(f"{gw.url}/v1/messages", json=ANTHROPIC, headers=HEADERS, timeout=30)
        assert local.status_code == 200
        session = local.headers["x-worksurface-session"]
        for path in ("/sessions", f"/sessions/{session}", "/metrics"):
            proxied = httpx.get(f"{gw.url}{path}", headers={"x-forwarded-for": "203.0.113.9"}, timeout=10)
            assert proxied.status_code == 403 and SECRET_TEXT not in proxied.text
        proxied = httpx.post(f"{gw.url}/v1/messages", json=ANTHROPIC, timeout=30,
                             headers={**HEADERS, "x-forwarded-for": "203.0.113.9"})
        assert proxied.status_code == 403
        assert len(fake.requests) == 1
