"""``gpufleet record`` as a test's child process, started so that it never outlives the test.

A recorder left running by a failed or killed test run keeps writing, holds its Lease and once
stalled a later run. So every recorder child the e2e ``RecorderProcess`` starts (not the emulator
chaos of ``tests/recorder``: with these guards its fake Kueue's requests to kmock timed out):

- leads a process group of its own (``process_group=0``, for ``subprocess.Popen`` and
  ``asyncio.create_subprocess_exec`` alike), and is stopped by SIGKILL to the whole group, then waited for
  until it no longer runs (``stop``);
- stays registered until stopped, so the autouse fixtures of ``tests/recorder`` and ``tests/e2e``
  stop whatever a test left, whether it passed, failed or was interrupted (``stop_all``);
- where util-linux's ``setpriv`` is installed, runs with SIGKILL as its parent-death signal, so even
  a test run that is itself killed (no teardown runs then) leaves none behind. Linux sends it when
  the thread that started the child ends: the e2e ``Supervisor``'s thread ends only as it stops the
  replicas it restarted.

A pid is signalled only while ``/proc/<pid>/stat`` shows the start time it had when registered, so a
pid the system has since given to another process is never hit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import gpufleet

STOP_TIMEOUT_S = 30.0  # a SIGKILLed process is gone in milliseconds; this only bounds a hang
_started: dict[int, str] = {}  # pid -> its start time (field 22 of /proc/<pid>/stat)


def guarded(argv: list[str]) -> list[str]:
    """``argv`` behind ``setpriv --pdeathsig KILL`` where that exists: it sets the signal and execs,
    so the pid is the command's."""
    guard = shutil.which("setpriv")
    return [guard, "--pdeathsig", "KILL", "--", *argv] if guard else argv


def command(*args: str) -> list[str]:
    """``python -m gpufleet record ARGS`` as a user runs it, guarded."""
    return guarded([sys.executable, "-m", "gpufleet", "record", *args])


def environment() -> dict[str, str]:
    """This checkout's source first on the child's path, so it runs the code under test."""
    src = str(Path(gpufleet.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process, or None when there is none with that pid."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19]


def register(pid: int) -> None:
    """Note a child just started, so ``stop_all`` finds it."""
    stat = _stat(pid)
    if stat is not None:
        _started[pid] = stat[1]


def _ours(pid: int, started: str) -> tuple[str, str] | None:
    stat = _stat(pid)
    return stat if stat is not None and stat[1] == started else None


def stop(pid: int) -> None:
    """SIGKILL a registered child's process group and wait until the child no longer runs.

    Dead is enough: its parent (``Popen.wait``, asyncio's child watcher) collects the exit status.
    """
    started = _started.pop(pid, None)
    if started is None or _ours(pid, started) is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while (stat := _ours(pid, started)) is not None and stat[0] != "Z":
        if time.monotonic() > deadline:
            raise RuntimeError(f"gpufleet record (pid {pid}) still runs {STOP_TIMEOUT_S:.0f}s after SIGKILL")
        time.sleep(0.01)


def stop_all() -> None:
    """Stop every registered child still running: a test's teardown, however the test ended."""
    for pid in list(_started):
        stop(pid)
