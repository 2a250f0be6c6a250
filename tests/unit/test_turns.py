"""Heavy callers give way to light ones between a search's stages (rag/turns.py)."""

from __future__ import annotations

import contextvars
import threading
import time

from prometheus_client import REGISTRY

from rag import turns
from rag.turns import Turns


def as_caller(key: str, call):
    context = contextvars.copy_context()
    context.run(turns.caller.set, key)
    return lambda: context.run(call)


def busy(t: Turns, key: str, calls: int) -> None:
    for _ in range(calls):
        t.started(key)
        t.ended(key)


def gave_way() -> float:
    return REGISTRY.get_sample_value("rag_compute_gave_way_seconds_total") or 0.0


def test_a_heavy_caller_waits_while_a_light_one_runs_and_goes_on_when_it_ends(monkeypatch) -> None:
    monkeypatch.setattr(turns, "MAX_WAIT_S", 5.0)  # a busy machine's pauses fall well within the wait
    before = gave_way()
    t = Turns()
    busy(t, "heavy", 20)
    t.started("heavy")  # the heavy caller's search, at a stage boundary below
    t.started("light")  # one call of a light caller, running
    waited: list[float] = []
    thread = threading.Thread(target=as_caller("heavy", lambda: waited.append(t.give_way())))
    thread.start()
    time.sleep(0.01)
    assert thread.is_alive(), "the heavy caller went on beside the light one's call"
    t.ended("light")
    thread.join(1)
    assert not thread.is_alive() and 0.005 < waited[0] < turns.MAX_WAIT_S
    assert gave_way() - before >= waited[0]  # /metrics shows it
    assert as_caller("light", t.give_way)() == 0.0, "the lighter caller never waits for a heavier one"


def test_a_wait_is_bounded_and_equals_never_wait() -> None:
    t = Turns()
    busy(t, "heavy", 20)
    t.started("light")
    began = time.monotonic()
    waited = as_caller("heavy", t.give_way)()
    assert turns.MAX_WAIT_S <= waited and time.monotonic() - began < turns.MAX_WAIT_S + 0.5
    busy(t, "peer", 20)  # as many calls as "heavy": neither gives way to the other
    t.started("peer")
    t.ended("light")
    assert as_caller("heavy", t.give_way)() == 0.0


def test_calls_without_a_caller_and_a_caller_alone_never_wait() -> None:
    t = Turns()
    busy(t, "heavy", 20)
    t.started("light")
    assert t.give_way() == 0.0  # the CLI, the editor, a test: no caller
    t.ended("light")
    t.started("heavy")
    assert as_caller("heavy", t.give_way)() == 0.0
