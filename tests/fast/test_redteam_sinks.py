"""Issue 58, item 7, attacked as an attacker would: event sink targets inside the catalog's network.

A user allowed CreateEventSink (and root) names a webhook or queue on a metadata service, a private
or link-local address, in every spelling a resolver reads as one, or a name that resolves inside.
Each is refused at put with a 400 that names the address class, and nothing is stored. A name that
resolves inside only at delivery (or a record stored before the check) is refused there, before
any connection: the failure is the sink's, parked like any other. An allowed delivery connects to
the address it checked, never to a second lookup, with the name's Host header and TLS name.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chalicelib import keys
from chalicelib.core.changes import dispatcher, event_senders, event_sinks, sink_network
from chalicelib.core.changes.sink_record import EventSink
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.errors import BadRequest
from chalicelib.settings import Settings
from tests.redteam_sinks_shared import ACCOUNT, INSIDE, LOOPBACK, _targets

LOOPBACK += ["hooks.localhost"]


def _ctx(core: Context, local: bool = False, allowed: str = "") -> Context:
    """The core as a deployment (no emulator) or a local run, with ranges an operator allows."""
    networks = tuple(ipaddress.ip_network(n) for n in allowed.split(",") if n)
    settings = dataclasses.replace(
        core.settings,
        s3_endpoint_url=(core.settings.s3_endpoint_url or "http://127.0.0.1:4566") if local else None,
        event_sink_allowed_networks=networks,
    )
    return Context(settings, core.storage)


def _refused(ctx: Context, kind: str, target: str) -> str:
    with pytest.raises(BadRequest) as caught:
        event_sinks._check_target(ctx, kind, target)
    return caught.value.message


@pytest.mark.parametrize(("host", "why"), INSIDE)
def test_every_spelling_of_an_inside_host_is_refused_at_put(host, why, core):
    for local in (False, True):  # a local run allows loopback, and nothing else
        for kind, target in _targets(host):
            message = _refused(_ctx(core, local), kind, target)
            assert f"Invalid {kind} sink target" in message and why in message, message
            assert sink_network.SETTING in message


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_is_refused_unless_the_run_is_local(host, core):
    for kind, target in _targets(host):
        assert "loopback" in _refused(_ctx(core), kind, target)
        event_sinks._check_target(_ctx(core, local=True), kind, target)  # accepted
    event_sinks._check_target(_ctx(core, local=True), "webhook", f"http://{host}:9/hook")


def test_public_hosts_and_aws_targets_are_accepted(core, monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", _resolver({"hooks.example.test": ["93.184.216.34"]}))
    for kind, target in [
        ("webhook", "https://hooks.example.test/h"),
        ("webhook", "https://93.184.216.34/h"),
        ("webhook", "https://[2606:4700::1]/h"),
        ("webhook", "https://[64:ff9b::808:808]/h"),  # NAT64 of a public address
        ("sqs", f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/q"),
        ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:t"),
        ("eventbridge", "default"),
    ]:
        assert event_sinks._check_target(_ctx(core), kind, target) == target


def _resolver(names: dict[str, list[str]], calls: list[str] | None = None) -> Any:
    """socket.getaddrinfo answering `names` as a DNS we control would (the rest as before)."""
    real = socket.getaddrinfo

    def fake(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in names:
            if calls is not None:
                calls.append(host)
            answer = names[host]
            if answer == ["slow"]:
                time.sleep(5)
            if not answer or answer == ["slow"]:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [_info(ip, int(port)) for ip in answer]
        return real(host, port, *args, **kwargs)

    return fake


def _info(ip: str, port: int) -> tuple[Any, ...]:
    if ":" in ip:
        return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))


def test_a_name_resolving_inside_is_refused_at_put(core, monkeypatch):
    """A webhook's name is looked up briefly at put; one that does not answer passes, to be checked
    at delivery. A queue URL's host is not looked up: the catalog never connects to it."""
    names = {
        "inside.example.test": ["10.0.0.7"],
        "imds.example.test": ["169.254.169.254"],
        "mixed.example.test": ["93.184.216.34", "127.0.0.1"],  # any address inside refuses the name
        "v6.example.test": ["2606:4700::1", "fd00:ec2::254"],
        "nowhere.example.test": [],
        "slow.example.test": ["slow"],
        "vpce-1.sqs.us-east-1.vpce.amazonaws.com": ["10.0.3.4"],
    }
    monkeypatch.setattr(socket, "getaddrinfo", _resolver(names))
    monkeypatch.setattr(sink_network, "PUT_LOOKUP_S", 0.3)
    for name, why in [
        ("inside", "resolves to 10.0.0.7, a private"),
        ("imds", "metadata-service"),
        ("mixed", "resolves to 127.0.0.1, a loopback"),
        ("v6", "metadata-service"),
    ]:
        assert why in _refused(_ctx(core), "webhook", f"https://{name}.example.test/h")
    assert "private" in _refused(_ctx(core, local=True), "webhook", "https://inside.example.test/h")
    started = time.monotonic()
    for name in ("nowhere", "slow"):
        event_sinks._check_target(_ctx(core), "webhook", f"https://{name}.example.test/h")
    assert time.monotonic() - started < 2  # a create never waits on a resolver that does not answer
    event_sinks._check_target(_ctx(core), "sqs", f"https://vpce-1.sqs.us-east-1.vpce.amazonaws.com/{ACCOUNT}/q")


def test_an_operator_allows_ranges_but_never_a_metadata_address_by_accident(core, monkeypatch):
    ctx = _ctx(core, allowed="10.0.0.0/8,169.254.0.0/16,fd00::/8")
    for target in ("https://10.1.2.3/h", "https://[::ffff:10.1.2.3]/h", "https://169.254.7.7/h", "https://[fd00::5]/h"):
        event_sinks._check_target(ctx, "webhook", target)
    for target in ("https://169.254.169.254/", "https://[fd00:ec2::254]/", "https://192.168.0.1/", "https://[::1]/"):
        assert "Invalid webhook sink target" in _refused(ctx, "webhook", target)
    event_sinks._check_target(_ctx(core, allowed="169.254.169.254/32"), "webhook", "https://169.254.169.254/")
    event_sinks._check_target(_ctx(core, allowed="127.0.0.0/8"), "webhook", "https://localhost/")
    # From the environment, read once with the other settings; a value that is no CIDR stops the start.
    monkeypatch.setenv("CATALOG_EVENT_SINK_ALLOWED_NETWORKS", " 10.20.0.0/16, fd12::/48 ,")
    assert [str(n) for n in Settings.from_env().event_sink_allowed_networks] == ["10.20.0.0/16", "fd12::/48"]
    monkeypatch.setenv("CATALOG_EVENT_SINK_ALLOWED_NETWORKS", "10.0.0.0/8,intranet")
    with pytest.raises(ValueError, match="CATALOG_EVENT_SINK_ALLOWED_NETWORKS"):
        Settings.from_env()


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        (None, False),  # AWS
        ("http://127.0.0.1:4566", True),
        ("http://localhost:4566", True),
        ("http://[::1]:9000", True),
        ("https://s3.eu-central-1.example-provider.com", False),  # another S3-compatible provider
        ("http://10.0.0.5:9000", False),  # an S3 in the network: its loopback is not a test's
    ],
)
def test_only_an_emulator_on_this_machine_makes_a_local_run(endpoint, local, core):
    """Loopback is a local run's allowance: a deployment on another S3 keeps its loopback (a
    function's runtime API) out of reach."""
    ctx = Context(dataclasses.replace(core.settings, s3_endpoint_url=endpoint), core.storage)
    assert sink_network.Policy.of(ctx.settings).loopback is local
    if local:
        event_sinks._check_target(ctx, "webhook", "http://127.0.0.1:9/hook")
    else:
        assert "loopback" in _refused(ctx, "webhook", "https://127.0.0.1:9/hook")
    sink = _webhook("https://127.0.0.1:9/hook")
    (error,) = event_senders.send(sink, [_event()], emulator=endpoint)  # the default: the same rule
    assert (error or "").startswith("refused: ") is not local


# ---- delivery -------------------------------------------------------------------------------------


@pytest.fixture()
def listener() -> Iterator[socket.socket]:
    """A port on this machine that must never be connected to."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def _untouched(sock: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        sock.accept()


def _stored_sink(ctx: Context, kind: str, target: str) -> tuple[str, dict[str, Any]]:
    """A warehouse whose sink record was written straight to S3 (as one from before the check was),
    then a change to send it."""
    wh = f"wh-rts-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    time.sleep(0.01)
    record = {
        "name": "s",
        "kind": kind,
        "target": target,
        "filters": {},
        "uuid": str(uuid.uuid4()),
        "created-ms": now_ms(),
        "secret": "k",
        "owner": {"name": "root", "id": ""},
    }
    ctx.storage.put_if_absent(ctx.bucket_for(wh), keys.event_sink("s"), dump(record))
    time.sleep(0.01)
    namespaces.create(ctx, wh, ["db"], {})
    return wh, record


def _parked(ctx: Context, wh: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    bucket = ctx.bucket_for(wh)
    found = ctx.storage.list_keys(bucket, keys.dead_events_prefix("s", record["uuid"]))
    return [json.loads(ctx.storage.get(bucket, key).body) for key in found]


@pytest.fixture()
def park_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatcher, "DEAD_AFTER", 1)
    monkeypatch.setattr(dispatcher, "PARK_AFTER_MS", 0)


def test_a_name_that_resolves_inside_at_delivery_is_parked_unconnected(core, monkeypatch, listener, park_at_once):
    """Public (or nowhere) at put, this machine when the dispatcher looks: a rebinding DNS."""
    port = listener.getsockname()[1]
    answers = {"rebind.example.test": ["93.184.216.34"], "half.example.test": ["93.184.216.34", "127.0.0.1"]}
    monkeypatch.setattr(socket, "getaddrinfo", _resolver(answers))
    ctx = _ctx(core)
    event_sinks._check_target(ctx, "webhook", f"https://rebind.example.test:{port}/hook")  # public at put
    answers["rebind.example.test"] = ["127.0.0.1"]
    for name in answers:
        wh, record = _stored_sink(ctx, "webhook", f"https://{name}:{port}/hook")
        report = dispatcher.dispatch(ctx, wh)
        assert report["s"]["sent"] == 0 and report["s"]["parked"] == 1, report
        (parked,) = _parked(ctx, wh, record)
        assert parked["error"].startswith("refused: ") and "resolves to 127.0.0.1, a loopback" in parked["error"]
        assert parked["event"]["type"].endswith("namespace.created")
        again = dispatcher.replay(ctx, wh, "s")
        assert again["replayed"] == 0 and again["still-failing"] == 1, again
    _untouched(listener)


def test_records_stored_before_the_check_are_refused_at_delivery(core, monkeypatch, listener, park_at_once):
    port = listener.getsockname()[1]

    def no_client(*_: Any) -> Any:
        raise AssertionError("the queue's endpoint was called")

    monkeypatch.setattr(event_senders, "_client", no_client)
    ctx = _ctx(core)
    for kind, target, why in [
        ("webhook", f"http://127.0.0.1:{port}/x", "loopback"),
        ("webhook", f"https://0x7f.1:{port}/x", "loopback"),
        ("webhook", "https://169.254.169.254/latest/meta-data/iam/", "metadata-service"),
        ("webhook", "https://[::ffff:10.0.0.1]/x", "private"),
        ("sqs", f"https://169.254.169.254/{ACCOUNT}/q", "metadata-service"),
        ("sqs", f"http://localhost:{port}/{ACCOUNT}/q", "loopback"),
    ]:
        wh, record = _stored_sink(ctx, kind, target)
        report = dispatcher.dispatch(ctx, wh)
        assert report["s"]["parked"] == 1, (target, report)
        (parked,) = _parked(ctx, wh, record)
        assert parked["error"].startswith("refused: ") and why in parked["error"], parked["error"]
    _untouched(listener)


class _Receiver(BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).hosts.append(self.headers["Host"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def _serve(tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _webhook(target: str) -> EventSink:
    return EventSink("hook", "webhook", target, "u", secret="k")


def _event() -> dict[str, Any]:
    return {"id": str(uuid.uuid4()), "type": "t", "data": {"trail": "x"}}


def test_an_allowed_delivery_connects_to_the_address_it_checked(monkeypatch):
    """The name is looked up once: a second answer (a rebinding DNS's) is never asked for."""
    server = _serve()
    calls: list[str] = []
    answers = {"hooks.example.test": ["127.0.0.1"]}
    monkeypatch.setattr(socket, "getaddrinfo", _resolver(answers, calls))
    real_connect = event_senders._connect

    def rebinding(addresses: Any, timeout: float) -> socket.socket:
        answers["hooks.example.test"] = ["10.255.255.1"]  # what a second lookup would get
        return real_connect(addresses, timeout)

    monkeypatch.setattr(event_senders, "_connect", rebinding)
    _Receiver.hosts = []
    try:
        port = server.server_address[1]
        sink = _webhook(f"http://hooks.example.test:{port}/hook")
        assert event_senders.send(sink, [_event()], policy=sink_network.Policy(loopback=True)) == [None]
        assert calls == ["hooks.example.test"] and _Receiver.hosts == [f"hooks.example.test:{port}"]
        # The same under a deployment's policy: refused, and the receiver hears nothing more.
        answers["hooks.example.test"] = ["127.0.0.1"]
        (error,) = event_senders.send(sink, [_event()], policy=sink_network.Policy())
        assert error is not None and error.startswith("refused: ") and len(_Receiver.hosts) == 1
    finally:
        server.shutdown()


def _certificate(tmp: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_https_to_the_checked_address_verifies_the_name(monkeypatch, tmp_path):
    """Connected by address, the TLS handshake still names the URL's host (SNI) and its certificate
    is verified for that name; one for another name fails."""
    cert, key = _certificate(tmp_path, "hooks.example.test")
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    sni: list[str | None] = []
    server_tls.sni_callback = lambda _sock, name, _ctx: sni.append(name)  # type: ignore[assignment]
    server = _serve(server_tls)
    client_tls = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(event_senders, "_tls", lambda: client_tls)
    answers = {"hooks.example.test": ["127.0.0.1"], "other.example.test": ["127.0.0.1"]}
    monkeypatch.setattr(socket, "getaddrinfo", _resolver(answers))
    _Receiver.hosts = []
    try:
        port, local = server.server_address[1], sink_network.Policy(loopback=True)
        sink = _webhook(f"https://hooks.example.test:{port}/hook")
        assert event_senders.send(sink, [_event()], policy=local) == [None]
        assert sni == ["hooks.example.test"] and _Receiver.hosts == [f"hooks.example.test:{port}"]
        other = _webhook(f"https://other.example.test:{port}/hook")
        (error,) = event_senders.send(other, [_event()], policy=local)
        assert error is not None and "certificate" in error.lower(), error
    finally:
        server.shutdown()
