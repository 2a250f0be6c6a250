"""The compute threads' turns (rag/api/compute.py): a caller with many calls waiting does not hold
back another caller's single call, and a caller that goes away while waiting frees its place."""

from __future__ import annotations

import asyncio

from rag.api.compute import FairLimiter


def test_turns_go_round_the_callers() -> None:
    async def scenario() -> list[str]:
        limiter = FairLimiter(1)
        served: list[str] = []

        async def call(key: str, name: str) -> None:
            await limiter.acquire(key)
            served.append(name)
            await asyncio.sleep(0.01)
            limiter.release(key)

        first = asyncio.create_task(call("noisy", "noisy-0"))
        await asyncio.sleep(0)  # it holds the one slot
        tasks = [asyncio.create_task(call("noisy", f"noisy-{n}")) for n in range(1, 6)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(call("quiet", "quiet")))  # arrives after five noisy calls
        await asyncio.gather(first, *tasks)
        return served

    served = asyncio.run(scenario())
    assert served[:3] == ["noisy-0", "noisy-1", "quiet"]  # one noisy call, then the quiet one's turn
    assert len(served) == 7


def test_one_caller_leaves_a_slot_to_the_others() -> None:
    async def scenario() -> list[str]:
        limiter = FairLimiter(2)
        started: list[str] = []

        async def call(key: str, name: str, hold: float) -> None:
            await limiter.acquire(key)
            started.append(name)
            await asyncio.sleep(hold)
            limiter.release(key)

        await call("quiet", "quiet-earlier", 0.0)  # another caller was here a moment ago
        started.clear()
        noisy = [asyncio.create_task(call("noisy", f"noisy-{n}", 0.05)) for n in range(4)]
        await asyncio.sleep(0.01)
        assert started == ["noisy-0"]  # the second slot stays free for someone else
        quiet = asyncio.create_task(call("quiet", "quiet", 0.0))
        await asyncio.sleep(0.01)
        assert started == ["noisy-0", "quiet"]  # at once, not after the noisy backlog
        await asyncio.gather(*noisy, quiet)
        return started

    assert len(asyncio.run(scenario())) == 5


def test_a_caller_alone_has_every_slot() -> None:
    async def scenario() -> int:
        limiter = FairLimiter(2)
        await limiter.acquire("only")
        await asyncio.wait_for(limiter.acquire("only"), 1)  # nobody else called: both slots are its
        return limiter.busy

    assert asyncio.run(scenario()) == 2


def test_a_caller_gone_while_waiting_leaves_the_queue_and_no_slot_is_lost() -> None:
    async def scenario() -> tuple[int, int]:
        limiter = FairLimiter(1)
        await limiter.acquire("a")
        waiting = asyncio.create_task(limiter.acquire("b"))
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        limiter.release("a")
        await asyncio.wait_for(limiter.acquire("c"), 1)  # free again: taken at once
        return limiter.busy, len(limiter.waiting)

    assert asyncio.run(scenario()) == (1, 0)
