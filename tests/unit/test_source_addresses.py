"""The address rule of sources (rag/sources/addresses.py): IPv6 forms that carry a private IPv4
address (NAT64, 6to4, Teredo, IPv4-compatible), the metadata ranges and the service's own address
that no allow list opens, and a source's own `allow_hosts` that may only narrow the operator's."""

from __future__ import annotations

import ipaddress
import os

import pytest

from rag.sources import addresses
from rag.sources.addresses import AddressRefused, narrowed, resolve, serving, widening


@pytest.fixture(autouse=True)
def no_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(addresses, "_serving", set())
    monkeypatch.delenv(addresses.SERVING_VARIABLE, raising=False)


# Each form carries 127.0.0.1, 10.0.0.1 or 192.168.1.1; its public twin carries 8.8.8.8 and passes.
EMBEDDED = {
    "nat64 loopback": ("64:ff9b::7f00:1", "64:ff9b::808:808"),
    "nat64 private": ("64:ff9b::a00:1", "64:ff9b::808:808"),
    "6to4 loopback": ("2002:7f00:1::", "2002:808:808::"),
    "6to4 private": ("2002:c0a8:101::1", "2002:808:808::1"),
    "ipv4-compatible": ("::7f00:1", None),
    "ipv4-mapped": ("::ffff:7f00:1", None),
}


@pytest.mark.parametrize("form", sorted(EMBEDDED))
def test_an_ipv6_form_of_a_private_ipv4_address_is_refused(form: str) -> None:
    private, public = EMBEDDED[form]
    with pytest.raises(AddressRefused, match="private, loopback or link-local"):
        resolve(f"[{private}]", 80)
    if public is not None:
        assert resolve(f"[{public}]", 80) == [public]


def test_teredo_and_local_use_nat64_are_refused() -> None:
    # Teredo: server 65.54.227.120, client 127.0.0.1 obfuscated (each bit inverted) in the last 32 bits.
    client = int(ipaddress.IPv4Address("127.0.0.1")) ^ 0xFFFFFFFF
    teredo = ipaddress.IPv6Address((0x20010000 << 96) | (int(ipaddress.IPv4Address("65.54.227.120")) << 64)
                                   | client)
    assert teredo.teredo[1] == ipaddress.IPv4Address("127.0.0.1")
    with pytest.raises(AddressRefused):
        resolve(str(teredo), 80)
    with pytest.raises(AddressRefused):  # a local-use NAT64 prefix (RFC 8215) leads wherever its translator says
        resolve("64:ff9b:1::808:808", 80)


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254",
                                     "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "100.100.100.200", "fe80::1"])
def test_a_metadata_address_is_refused_even_when_the_operator_allows_it(address: str) -> None:
    with pytest.raises(AddressRefused, match="metadata or link-local address; always refused"):
        resolve(f"[{address}]" if ":" in address else address, 80, (address,))


def test_the_services_own_address_and_port_are_refused_other_ports_stay_allowable() -> None:
    assert resolve("127.0.0.1", 8000, ("127.0.0.1",)) == ["127.0.0.1"]  # nothing serves here yet
    serving("127.0.0.1", 8000)
    for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "127.0.0.2"):
        with pytest.raises(AddressRefused, match="this service's own address; always refused"):
            resolve(host, 8000, (host.strip("[]"),))
    assert resolve("127.0.0.1", 8001, ("127.0.0.1",)) == ["127.0.0.1"]
    assert addresses.SERVING_VARIABLE in os.environ  # `--workers N` processes learn it too


def test_a_service_listening_on_every_address_refuses_its_port_on_any_allowed_address() -> None:
    serving("0.0.0.0", 9000)
    with pytest.raises(AddressRefused, match="own address"):
        resolve("10.0.0.5", 9000, ("10.0.0.5",))
    assert resolve("10.0.0.5", 9001, ("10.0.0.5",)) == ["10.0.0.5"]


def test_a_sources_own_list_only_narrows_the_operators() -> None:
    operator = ("127.0.0.1", "files.internal")
    assert narrowed(operator, []) == operator
    assert narrowed(operator, ["127.0.0.1"]) == ("127.0.0.1",)
    assert narrowed(operator, ["127.0.0.1", "169.254.169.254"]) == ("127.0.0.1",)
    assert narrowed((), ["127.0.0.1"]) == ()
    assert widening(operator, ["FILES.internal.", "[::1]", "169.254.169.254"]) == ["[::1]", "169.254.169.254"]
    with pytest.raises(AddressRefused, match="only the operator may allow"):
        resolve("127.0.0.1", 80, narrowed((), ["127.0.0.1"]))
