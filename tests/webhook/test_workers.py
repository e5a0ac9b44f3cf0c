"""``gpufleet webhook serve --workers 2``: two review processes behind one port, as a user runs it.

Real processes over real TLS: which worker answers is the kernel's choice, so each check holds
whichever one does. Every scrape of /metrics adds up both workers' counts; a renewed certificate
respawns the workers without losing a count; SIGTERM leaves no process and no metrics files behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import trustme

from tests.webhook.test_server import job, review
from tests.webhook.tls_server import ServeCommand, served_serial, wait_until, write_pair

WORKERS = 2


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc: what is running now)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def _workers(served: ServeCommand) -> dict[int, str]:
    """granian's worker processes (multiprocessing also starts a resource tracker: not a worker),
    with the metrics directory each writes to."""
    found = {}
    for pid in _children(served.process.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            environ = dict(
                e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if "=" in e
            )
        except OSError:
            continue
        if b"multiprocessing.spawn" in cmdline and b"resource_tracker" not in cmdline:
            found[pid] = environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    return found


def _reviews_counted(c: httpx2.Client) -> float:
    text = c.get("/metrics").text
    pattern = r'^gpufleet_webhook_reviews_total\{endpoint="validate",[^}]*\} (\S+)$'
    return sum(float(m) for m in re.findall(pattern, text, re.MULTILINE))


DENIED, ALLOWED = review(job({})), review(None, operation="DELETE")  # no labels; a DELETE has nothing to judge


def _review_on_a_new_connection(served: ServeCommand, body: dict[str, object]) -> int:
    with served.client(headers={"connection": "close"}) as c:
        return c.post("/validate", json=body).status_code


def test_two_workers_answer_and_every_scrape_counts_both(ca: trustme.CA, tmp_path: Path) -> None:
    with ServeCommand(ca, tmp_path, ("--workers", str(WORKERS), "--reload-seconds", "0.2")) as served:
        wait_until(lambda: len(_workers(served)) == WORKERS, f"{WORKERS} worker processes", alive=served.alive)
        first = _workers(served)
        sent = 0

        def answered_by_each() -> bool:
            nonlocal sent
            assert _review_on_a_new_connection(served, ALLOWED if sent % 2 else DENIED) == 200
            sent += 1
            return len({line.get("pid") for line in served.lines_so_far() if line.get("msg") == "review"}) == WORKERS

        wait_until(answered_by_each, "each worker to answer a review", alive=served.alive, poll_s=0)
        with served.client() as c:
            for _ in range(6):  # whichever worker answers the scrape, it counts every review
                assert _reviews_counted(c) == sent

        # a renewed certificate: the workers are respawned, new handshakes get it, no count is lost
        before = served_serial(served.port, served.context)
        write_pair(ca, tmp_path)
        wait_until(
            lambda: served_serial(served.port, served.context) != before, "the renewed certificate", alive=served.alive
        )
        wait_until(
            lambda: len(_workers(served)) == WORKERS and not set(first) & set(_workers(served)),
            "the old workers to be replaced",
            alive=served.alive,
        )
        assert _review_on_a_new_connection(served, DENIED) == 200
        with served.client() as c:
            assert _reviews_counted(c) == sent + 1
        everyone = [served.process.pid, *first, *_workers(served)]
        metrics_dirs = set(first.values()) | set(_workers(served).values())
    assert served.returncode == 0, served.lines[-5:]
    assert not any(Path(f"/proc/{pid}").exists() and _children(pid) for pid in everyone)
    assert not any(Path(f"/proc/{pid}/stat").exists() for pid in everyone[1:])  # no worker outlives the server
    assert len(metrics_dirs) == 1 and "" not in metrics_dirs and not Path(metrics_dirs.pop()).exists()  # removed
    assert any(line.get("msg") == "certificate reloaded" for line in served.lines)
    reviews = [line for line in served.lines if line.get("msg") == "review"]
    assert len(reviews) == sent + 1 and len({line["pid"] for line in reviews}) >= WORKERS
    assert {line["outcome"] for line in reviews} == {"allowed", "denied"}
