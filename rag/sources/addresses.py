"""Which addresses a source may reach. A source's URLs come from its settings and from what it
fetches (links, redirects, sitemaps), so a page could point the service at its own loopback, a
private network or a cloud metadata endpoint (server-side request forgery). Every host is
resolved and each of its addresses checked here, again after every redirect, and the connection
goes to the address that was checked (so a second DNS answer cannot swap it).

Only the operator lifts the rule, for the hosts `RAG_SOURCES__ALLOW_HOSTS` names (the tests name
127.0.0.1). A source's own `allow_hosts` may only narrow that list (`narrowed`): a host it names
that the operator's list does not is refused when the source is added or changed (`widening`) and
never allowed. Two things stay refused whoever allows them: the metadata ranges of the clouds
(169.254.0.0/16, fe80::/10, fd00:ec2::254, 100.100.100.200), and the address and port this
service listens on (`serving`: its own API, /metrics included; other ports on 127.0.0.1 stay
allowable). An IPv6 address that carries an IPv4 one (IPv4-mapped or -compatible, NAT64, 6to4,
Teredo) is checked by the IPv4 address it carries too."""

from __future__ import annotations

import ipaddress
import os
import socket

# Hosts that name the machine or the cloud's metadata service whatever they resolve to.
_NAMED = {"localhost", "localhost.localdomain", "metadata", "metadata.google.internal", "instance-data"}
# The clouds' instance metadata endpoints: never reachable, whatever the operator allows.
_METADATA = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "100.100.100.200/32", "fe80::/10", "fd00:ec2::254/128"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215): where it leads is local
_COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (deprecated), `::127.0.0.1`
# Where this process serves its API (`rag serve`), as (address, port); the environment carries it to
# `rag serve --workers N`'s worker processes.
SERVING_VARIABLE = "RAG_SERVING_ADDRESS"
_serving: set[tuple[str, int]] = set()

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefused(ValueError):
    """The host is private, loopback, link-local, reserved or a metadata endpoint, and not allowed."""


def serving(host: str, port: int) -> None:
    """Record that this process serves on `host`:`port` (`rag serve`): no source reaches it."""
    _serving.add((host.strip("[]").lower(), int(port)))
    os.environ[SERVING_VARIABLE] = ",".join(f"[{h}]:{p}" for h, p in sorted(_serving))


def serving_from_environment() -> None:
    """A worker process of `rag serve --workers N`: the address its parent recorded."""
    for entry in os.environ.get(SERVING_VARIABLE, "").split(","):
        host, _, port = entry.rpartition(":")
        if host and port.isdigit():
            _serving.add((host.strip("[]"), int(port)))


def _key(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def narrowed(operator: tuple[str, ...] | list[str], own: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The hosts a source may reach although private: the operator's list, or the part of it the
    source's own list names (a host only the source names is never allowed)."""
    if not own:
        return tuple(operator)
    allowed = {_key(h) for h in operator}
    return tuple(dict.fromkeys(h for h in own if _key(h) in allowed))


def widening(operator: tuple[str, ...] | list[str], own: tuple[str, ...] | list[str]) -> list[str]:
    """The hosts of a source's own list that the operator's list does not name."""
    allowed = {_key(h) for h in operator}
    return [h for h in own if _key(h) not in allowed]


def _embedded(address: IP) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (and routes to, through a translator or tunnel)."""
    if isinstance(address, ipaddress.IPv4Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _private(address: IP) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address in _NAT64_LOCAL:
        return True
    return any(not a.is_global or a.is_multicast for a in (address, *_embedded(address)))


def _metadata(address: IP) -> bool:
    return any(a in net for a in (address, *_embedded(address)) for net in _METADATA if a.version == net.version)


def _service(address: IP, port: int) -> bool:
    """Whether `address`:`port` reaches this service's own listener."""
    for host, serving_port in _serving:
        if port != serving_port:
            continue
        try:
            listen = ipaddress.ip_address(host)
        except ValueError:  # a name such as localhost: its loopback addresses
            listen = ipaddress.ip_address("127.0.0.1")
        if address.is_loopback or listen.is_unspecified or address == listen \
                or any(a.is_loopback or a == listen for a in _embedded(address)):
            return True
    return False


def resolve(host: str, port: int, allow_hosts: tuple[str, ...] = ()) -> list[str]:
    """The addresses to connect to for `host`, each checked; AddressRefused when one is refused
    (every one must pass: an answer mixing a public and a private address is refused).
    `allow_hosts`: what the operator allows this source (`narrowed`)."""
    name = _key(host)
    allowed = name in {_key(h) for h in allow_hosts}
    if not allowed and (name in _NAMED or name.endswith(".localhost")):
        raise AddressRefused(f"{host} is a local or metadata host; refused (only the operator may allow it: "
                             "RAG_SOURCES__ALLOW_HOSTS)")
    try:
        literal = ipaddress.ip_address(name)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:  # the resolver's own timeouts bound it (resolv.conf); no process-wide setting is touched
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, OSError):
            raise AddressRefused(f"{host} cannot be resolved") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        checked = ipaddress.ip_address(address.split("%")[0])
        if _metadata(checked):
            raise AddressRefused(f"{host} resolves to a cloud metadata or link-local address; always refused")
        if _service(checked, port):
            raise AddressRefused(f"{host}:{port} is this service's own address; always refused")
        if not allowed and _private(checked):
            raise AddressRefused(
                f"{host} resolves to a private, loopback or link-local address; refused "
                "(only the operator may allow a host: RAG_SOURCES__ALLOW_HOSTS)")
    return addresses


def check_allow_hosts(hosts: list[str]) -> list[str]:
    """A source's `allow_hosts` setting, checked: host names or addresses, nothing a URL adds."""
    for host in hosts:
        if not host or any(c.isspace() or c in "/@?#" for c in host):
            raise ValueError(f"allow_hosts holds host names or addresses, not {host!r}")
    return hosts
