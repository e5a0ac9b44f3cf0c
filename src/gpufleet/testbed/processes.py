"""Start, health-check and stop the testbed's server processes, leaving each one's log behind.

Each process gets its own session (process group), so stopping it never signals anything this module
did not start, and ``stop`` can run from another Python process (``make testbed-down``) using only the
pid and the binary recorded at start: a pid is signalled only while ``/proc/<pid>/exe`` is still
that binary, so a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.25
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 40


class TestbedError(RuntimeError):
    """The testbed could not be built, started or stopped; the message says where the logs are."""

    __test__ = False  # not a pytest test class despite the name


@dataclass(frozen=True)
class Started:
    """A process the testbed started: enough to find it again, read its log, and start it again."""

    name: str
    pid: int
    log: Path
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # set on top of the caller's environment

    @property
    def binary(self) -> str:
        return self.argv[0]


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def start(name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> Started:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    return Started(name=name, pid=proc.pid, log=log, argv=tuple(argv), env=tuple(sorted((env or {}).items())))


def alive(proc: Started) -> bool:
    """True while the pid runs the binary it was started with and is not a zombie.

    The check reads ``/proc/<pid>/exe``, which points at the new binary from the first moment of
    ``exec`` (the command line is briefly empty then), and which a kernel thread does not have.
    """
    try:
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        status = Path(f"/proc/{proc.pid}/stat").read_text()
    except OSError:
        return False
    state = status.rsplit(")", 1)[-1].split()[0]
    return state != "Z" and exe.removesuffix(" (deleted)") == os.path.realpath(proc.binary)


def _reap(pid: int) -> None:
    """Collect the exit status when this process is the parent; harmless otherwise."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop(proc: Started, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; only while the pid is still our binary."""
    if not alive(proc):
        _reap(proc.pid)
        return
    os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(proc.pid)
        if not alive(proc):
            return
        time.sleep(POLL_S)
    if alive(proc):
        os.kill(proc.pid, signal.SIGKILL)
    _reap(proc.pid)


def wait_until(proc: Started, check: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Poll ``check`` until it holds; fail early, with the log's tail, if the process exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(proc):
            raise TestbedError(f"{proc.name} exited before {what}; log {proc.log}:\n{log_tail(proc.log)}")
        if check():
            return
        time.sleep(POLL_S)
    raise TestbedError(f"{proc.name}: no {what} after {timeout_s:.0f}s; log {proc.log}:\n{log_tail(proc.log)}")


def http_ok(url: str, context: ssl.SSLContext | None = None) -> Callable[[], bool]:
    """A check that GETs ``url`` and holds on a 200 answer."""

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    return check


def insecure_context() -> ssl.SSLContext:
    """For health endpoints of components serving a self-signed certificate they made themselves."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
