"""Which hosts the catalog may connect to on a sink's behalf: none inside its own network.

Whoever may CreateEventSink picks a target, and the dispatcher then connects from where the
catalog runs: a VPC, a metadata service at 169.254.169.254, a Lambda runtime API on loopback. So a
target whose host is, or resolves to, an address that is not public is refused: loopback,
link-local, private, shared (100.64.0.0/10), unspecified, multicast, reserved, or a cloud metadata
service's. Loopback is allowed on local runs (the catalog on an S3 emulator on this machine,
S3_ENDPOINT_URL), and an operator may allow ranges (CATALOG_EVENT_SINK_ALLOWED_NETWORKS).

A host is checked when a sink is put (its literal address in any form a resolver reads, well-known
names, and a short lookup of other names) and again at each delivery: the name is resolved once,
every address it has must pass, and the connection goes to an address checked, never to a second
lookup that a rebinding DNS could answer differently.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chalicelib.settings import Settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
SockAddr = tuple[Any, ...]

SETTING = "CATALOG_EVENT_SINK_ALLOWED_NETWORKS"
PUT_LOOKUP_S = 2.0  # a create waits no longer for DNS: a name it cannot resolve is checked at delivery
SEND_LOOKUP_S = 5.0

# Metadata and credential services of the clouds and container platforms a catalog runs on. Most
# are link-local or private anyway; named here so a refusal says what they are, and because an
# allowed range opens one only when it names that very address (/32, /128).
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # EC2 IMDS, GCE, Azure IMDS, OpenStack, DigitalOcean ...
        "169.254.170.2",  # ECS task metadata and credentials
        "169.254.170.23",  # EKS Pod Identity
        "169.254.169.253",  # the VPC's DNS resolver
        "169.254.169.123",  # Amazon Time Sync
        "fd00:ec2::254",  # EC2 IMDS over IPv6
        "fd00:ec2::23",  # EKS Pod Identity over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure WireServer (a public-looking address that is the host's)
    )
)
METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT; Python counts it neither private nor global
THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # 0.0.0.0 reaches this machine on Linux
# Not global, yet not private by Python 3.11's tables either.
NOT_ROUTED = (ipaddress.ip_network("192.0.0.0/24"), ipaddress.ip_network("fec0::/10"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: the IPv4 address is its last 32 bits

LOOPBACK = "a loopback address"
LOOPBACK_NAME = "a loopback name (this machine)"
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_INET_PART = re.compile(r"0[x][0-9a-f]*|0[0-7]*|[1-9][0-9]*")


class Refused(ValueError):
    """A host the catalog will not connect to; the message names it, its address and the address's class."""


@dataclass(frozen=True)
class Policy:
    """What a deployment lets sinks reach beyond public addresses."""

    loopback: bool = False  # this machine: local runs only, where test receivers and emulators listen
    allowed: tuple[Network, ...] = ()  # ranges an operator allows

    @classmethod
    def of(cls, settings: Settings) -> Policy:
        # A local run is the catalog on an S3 emulator (the notion that already lets a webhook be
        # plain http:// to this machine) on this very machine: a deployment on another S3-compatible
        # endpoint is no local run, and its loopback (a Lambda's runtime API) stays out of reach.
        return cls(local_run(settings.s3_endpoint_url), settings.event_sink_allowed_networks)


def address_class(address: Address) -> str | None:
    """Why an address is not a public one, or None when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF) if address in NAT64 else None)
        if inner is not None:  # the packets go to the IPv4 address it carries
            return address_class(inner)
        if address.sixtofour is not None and address_class(address.sixtofour):
            return "a 6to4 address of a non-public IPv4 address"
    if address in METADATA:
        return "a cloud metadata-service address"
    if address.is_unspecified or address in THIS_NETWORK:
        return "an unspecified address"
    if address.is_loopback:
        return LOOPBACK
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_reserved:  # before private: Python counts 240.0.0.0/4 as both
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global or any(address in n for n in NOT_ROUTED):
        return "an address that is not globally routable"
    return None


def _plain(address: Address) -> Address:
    """The IPv4 address an IPv4-mapped or NAT64 address stands for; the address itself otherwise."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refusal(address: Address, policy: Policy) -> str | None:
    """Why the catalog may not connect to the address under the policy (None: it may)."""
    why = address_class(address)
    if why is None or (why == LOOPBACK and policy.loopback):
        return None
    plain = _plain(address)
    for net in policy.allowed:
        if plain.version == net.version and plain in net and (plain not in METADATA or net.num_addresses == 1):
            return None
    return why


def literal(host: str) -> Address | None:
    """The address a host names by itself, in every form a resolver reads as one: IPv6 (with a
    zone or not), dotted IPv4, and inet_aton's others (`2852039166`, `0x7f.1`, `0177.0.0.1`, `127.1`)."""
    bare = host[:-1] if host.endswith(".") and ":" not in host else host
    if ":" in bare:
        try:
            return ipaddress.IPv6Address(bare.split("%", 1)[0])
        except ValueError:
            return None
    try:
        return ipaddress.IPv4Address(bare)
    except ValueError:
        pass
    parts = bare.lower().split(".")
    if not 1 <= len(parts) <= 4 or not all(_INET_PART.fullmatch(p) for p in parts):
        return None
    values = [int(p[2:] or "0", 16) if p.startswith("0x") else int(p, 8) if p[0] == "0" else int(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = last
    for i, v in enumerate(head):
        number |= v << (24 - 8 * i)
    return ipaddress.IPv4Address(number)


def _name_class(name: str) -> str | None:
    """What a name is known to be without asking DNS (RFC 6761's localhost, metadata services)."""
    name = name.rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return LOOPBACK_NAME
    if name in METADATA_NAMES:
        return "a cloud metadata-service name"
    return None


def local_run(s3_endpoint: str | None) -> bool:
    """Whether the catalog's S3 is an emulator on this machine."""
    host = urlsplit(s3_endpoint or "").hostname
    if host is None:
        return False
    address = literal(host)
    return _name_class(host) == LOOPBACK_NAME if address is None else address_class(address) == LOOPBACK


def _valid_name(host: str) -> bool:
    name = host[:-1] if host.endswith(".") else host
    return 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split("."))


def _refused(host: str, what: str) -> Refused:
    return Refused(
        f"its host {host[:100]} {what}: sinks may not reach loopback, link-local, private, reserved or "
        f"metadata-service addresses unless the operator allows the range ({SETTING})"
    )


def check_host(host: str, policy: Policy, lookup_s: float | None = None) -> None:
    """Refused unless the host may be reached under the policy. With `lookup_s`, a name is also
    resolved (for at most that long) and refused if any address it has is refused; a name that
    does not resolve passes, to be checked at delivery."""
    address = literal(host)
    if address is not None:
        why = refusal(address, policy)
        if why is not None:
            raise _refused(host, f"is {why}" if str(address) == host else f"is {why} ({address})")
        return
    if not _valid_name(host):
        raise Refused(f"its host {host[:100]!r} is not a valid name or address")
    why = _name_class(host)
    if why == LOOPBACK_NAME and refusal(ipaddress.IPv4Address("127.0.0.1"), policy) is None:
        return  # this machine may be reached here; at delivery its addresses are checked
    if why is not None:
        raise _refused(host, f"is {why}")
    if lookup_s is None:
        return
    try:
        found = _lookup(host, 443, lookup_s)
    except OSError:
        return
    _vet(host, found, policy)


def _vet(host: str, found: list[tuple[int, SockAddr]], policy: Policy) -> None:
    for _, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        why = refusal(address, policy)
        if why is not None:
            raise _refused(host, f"resolves to {address}, {why}")


def resolve(host: str, port: int, policy: Policy, lookup_s: float = SEND_LOOKUP_S) -> list[tuple[int, SockAddr]]:
    """The (family, socket address) pairs to connect to for host:port, each checked: Refused if the
    host or any address it resolves to is refused, OSError if it does not resolve."""
    check_host(host, policy)
    address = literal(host)
    if address is not None:  # numeric: no DNS, and no resolver's reading of it but ours
        text = str(address) if address.version == 4 else host.rstrip(".")
        found = _lookup(text, port, lookup_s, socket.AI_NUMERICHOST)
    else:
        found = _lookup(host, port, lookup_s)
    _vet(host, found, policy)
    return found


def _lookup(host: str, port: int, timeout_s: float, flags: int = 0) -> list[tuple[int, SockAddr]]:
    """getaddrinfo, given up on after `timeout_s` (it has no timeout of its own); OSError on failure."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=flags))
        except (OSError, UnicodeError, ValueError) as exc:  # UnicodeError: a label the IDNA codec refuses
            out.append(exc)

    worker = threading.Thread(target=run, name="sink-lookup", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not out:
        raise TimeoutError(f"looking up {host[:100]} took over {timeout_s:g} s")
    if isinstance(out[0], BaseException):
        raise out[0] if isinstance(out[0], OSError) else OSError(str(out[0]))
    found = [(int(family), tuple(sockaddr)) for family, _, _, _, sockaddr in out[0]]
    if not found:
        raise OSError(f"{host[:100]} has no address")
    return list(dict.fromkeys(found))
