"""How much this process's memory grew while a block ran: its high-water mark (VmHWM) at the end
less its resident size (VmRSS) at the start, reset first through /proc/self/clear_refs (Linux), so a
hostile input's cost is measured in the process that read it, as `rag serve` would pay it."""

from __future__ import annotations

from pathlib import Path


def _status(field: str) -> int:
    """This process's VmRSS or VmHWM, in KiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


class Growth:
    """`with Growth() as growth: …`, then `growth.bytes`."""

    bytes = 0

    def __enter__(self) -> Growth:
        try:  # the high-water mark from here on (writing 5 to clear_refs resets VmHWM)
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass  # then the mark since the process began: it can only read higher, never lower
        self._before = _status("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.bytes = (_status("VmHWM") - self._before) * 1024
