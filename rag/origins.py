"""Which Host and Origin headers the service answers: the defence against DNS rebinding and
against other sites' pages calling it from a browser (issue 27).

    rules = HeaderRules(settings.allowed_hosts, settings.allowed_origins)
    refusal = rules.refusal(host_values, origin_values)   # None, or (error code, message) for a 403

- **Host**: one of `RAG_ALLOWED_HOSTS` (`name` any port, `name:port` that port, `name:*` any port;
  default the loopback name `localhost`), or an IP address literal (`10.0.0.5:8000`, `[::1]`). A
  DNS-rebinding page can only make a browser send the attacker's *name* as Host, never an address
  it did not type, so addresses pass whatever the list says.
- **Origin** (sent by browsers only): absent passes (curl, the MCP SDK, agents); the request's own
  origin (`Origin` naming exactly the Host) passes, since the Host check already holds; otherwise
  it must be one of `RAG_ALLOWED_ORIGINS` (`scheme://name[:port]`, `:*` for any port).

The lists are general: /mcp checks them now, and the same `RAG_ALLOWED_ORIGINS` is the CORS list
to come.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import NamedTuple

LOOPBACK_NAMES = ("localhost",)
LOOPBACK_BINDS = ("localhost",)  # and every 127.x and ::1, checked as addresses ("" is every interface)

INVALID_HOST = (
    "invalid_host",
    "this server does not answer to the Host this request names (RAG_ALLOWED_HOSTS lists the names it answers to)",
)
INVALID_ORIGIN = (
    "invalid_origin",
    "requests from this Origin are not allowed (RAG_ALLOWED_ORIGINS lists the browser origins that may call "
    "this server)",
)


class _HostPort(NamedTuple):
    name: str  # lower case; an IPv6 address keeps its brackets
    port: str  # "" when the value has none, "*" in a rule for any port


def _host_port(value: str) -> _HostPort | None:
    """`name[:port]` or `[v6]:port` split, lower-cased; None when it is no such thing."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[: end + 1], value[end + 1:]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, sep, port = value.partition(":")
        if sep and not port:
            return None
    if not name or "/" in name or "@" in name:
        return None
    if port and port != "*" and not port.isdigit():
        return None
    return _HostPort(name, port)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return True


def _matches(value: _HostPort, rules: Iterable[_HostPort]) -> bool:
    return any(value.name == rule.name and rule.port in ("*", value.port) for rule in rules)


def host_rule(entry: str) -> _HostPort:
    """One entry of RAG_ALLOWED_HOSTS; a name without a port allows any port. ValueError if malformed."""
    parsed = _host_port(entry)
    if parsed is None or not entry.strip():
        raise ValueError(f"{entry!r} is not a host name with an optional :port (or :*)")
    return parsed if parsed.port else parsed._replace(port="*")


def origin_rule(entry: str) -> tuple[str, _HostPort]:
    """One entry of RAG_ALLOWED_ORIGINS: `scheme://name[:port]` (`:*` any port). ValueError if malformed."""
    scheme, sep, rest = entry.strip().rstrip("/").partition("://")
    parsed = _host_port(rest) if sep and scheme.lower() in ("http", "https") else None
    if parsed is None:
        raise ValueError(f"{entry!r} is not an origin such as https://app.example or http://localhost:*")
    return scheme.lower(), parsed


class HeaderRules:
    """The Host and Origin checks of one deployment (the two settings, read once)."""

    def __init__(self, hosts: Sequence[str], origins: Sequence[str]) -> None:
        self.hosts = [host_rule(entry) for entry in hosts]
        self.origins = [origin_rule(entry) for entry in origins]

    def host_allowed(self, host: str) -> bool:
        parsed = _host_port(host)
        return parsed is not None and (_is_address(parsed.name) or _matches(parsed, self.hosts))

    def origin_allowed(self, origin: str, host: str) -> bool:
        scheme, sep, rest = origin.strip().lower().partition("://")
        parsed = _host_port(rest) if sep else None
        if parsed is None:  # "null" (a sandboxed frame, a file:// page) and anything malformed
            return False
        if rest == host.strip().lower():  # the request's own origin, its Host already allowed
            return True
        return any(scheme == rule_scheme and _matches(parsed, [rule]) for rule_scheme, rule in self.origins)

    def refusal(self, hosts: Sequence[str], origins: Sequence[str]) -> tuple[str, str] | None:
        """(error code, message) for a 403, or None when the request may go on. `hosts` and `origins`:
        every value of the header (more than one of either is refused)."""
        if len(hosts) != 1 or not self.host_allowed(hosts[0]):
            return INVALID_HOST
        if len(origins) > 1 or (origins and not self.origin_allowed(origins[0], hosts[0])):
            return INVALID_ORIGIN
        return None


def bind_warning(bind_host: str, allowed_hosts: Sequence[str]) -> str | None:
    """What `rag serve` says at start when it listens beyond loopback but only loopback names are
    allowed: clients that use a name for this machine would get 403 from /mcp."""
    if bind_host in LOOPBACK_BINDS or _is_loopback(bind_host):
        return None
    if any(host_rule(entry).name not in LOOPBACK_NAMES for entry in allowed_hosts):
        return None
    return (
        f"listening on {bind_host}, but RAG_ALLOWED_HOSTS names only {', '.join(allowed_hosts)}: /mcp answers "
        "403 to a client that reaches this server by another name (an IP address always passes). Set "
        "RAG_ALLOWED_HOSTS to the names clients use, as docker/compose.yaml sets rag:8000"
    )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
