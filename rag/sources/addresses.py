"""Which addresses a source may reach. A source's URLs come from its settings and from what it
fetches (links, redirects, sitemaps), so a page could point the service at its own loopback, a
private network or a cloud metadata endpoint (server-side request forgery). Every host is
resolved and each of its addresses checked here, again after every redirect, and the connection
goes to the address that was checked (so a second DNS answer cannot swap it). A source lifts the
rule for the hosts it names in `allow_hosts` only (the tests name 127.0.0.1)."""

from __future__ import annotations

import ipaddress
import socket

# Hosts that name the machine or the cloud's metadata service whatever they resolve to.
_NAMED = {"localhost", "localhost.localdomain", "metadata", "metadata.google.internal", "instance-data"}


class AddressRefused(ValueError):
    """The host is private, loopback, link-local, reserved or a metadata endpoint, and not allowed."""


def _private(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def resolve(host: str, port: int, allow_hosts: tuple[str, ...] = ()) -> list[str]:
    """The addresses to connect to for `host`, each checked; AddressRefused when one is refused
    (every one must pass: an answer mixing a public and a private address is refused)."""
    name = host.strip("[]").rstrip(".").lower()
    allowed = name in {h.strip("[]").lower() for h in allow_hosts}
    if not allowed and (name in _NAMED or name.endswith(".localhost")):
        raise AddressRefused(f"{host} is a local or metadata host; refused (a source may allow it by name)")
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
    if not allowed:
        for address in addresses:
            if _private(ipaddress.ip_address(address.split("%")[0])):
                raise AddressRefused(
                    f"{host} resolves to a private, loopback or link-local address; refused "
                    "(a source may allow a host by name)")
    return addresses


def check_allow_hosts(hosts: list[str]) -> list[str]:
    """A source's `allow_hosts` setting, checked: host names or addresses, nothing a URL adds."""
    for host in hosts:
        if not host or any(c.isspace() or c in "/@?#" for c in host):
            raise ValueError(f"allow_hosts holds host names or addresses, not {host!r}")
    return hosts
