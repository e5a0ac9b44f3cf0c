"""Webhook latency and server CPU per review over TLS on loopback, per server candidate, and where the time goes.

Run: ``PYTHONPATH=src python bench/webhook_bench.py [--seconds 5] [--repeat 3] [--servers ...] [--clients go,python]``

Each candidate (``bench/webhook_servers.py``) serves gpufleet's own webhook app as its own process, logs
at info level to /dev/null; ``gpufleet webhook serve`` itself is the ``shipped`` row, and with
``--workers 2`` (two review processes behind the port) the ``shipped-2w`` row. Two load
generators drive it, each row saying which: ``go`` (``bench/webhook_load``, built on first use, see
``go_client``) and ``python`` (this process, asyncio on uvloop). Both keep HTTPS connections alive
(as the API server keeps them), each client sending the next review as soon as the last answer
arrived, alternating an admitted and a denied Job from examples/fleet.yaml. Client and server share
the machine's cores, so latency includes the client's cost and whatever else runs: the Go client
costs less CPU per request, which leaves more to the server. Server CPU per review (user + system
time of the server's processes over the requests) is the figure that depends least on the
neighbours. Target (issue 16): p99 under 5 ms at 16 clients on a 2-core machine; baseline this week:
14.4 ms p99, 433 µs server CPU per review.

Then, for the shipped server: 1 and 64 clients, a new TLS connection per review (what keep-alive
saves), plain HTTP (what TLS costs), and the app's parts in-process (CPU per review).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "examples" / "fleet.yaml"
TARGET_P99_MS = 5.0
BASELINE_P99_MS = 14.4
BASELINE_CPU_US = 433.0
CLIENTS = 16
LOAD = ROOT / "bench" / "webhook_load"  # the Go load generator's source
GO_FALLBACK = Path("/usr/local/go/bin/go")
# ``gpufleet webhook serve`` itself, as shipped (one process) and with two review processes
SHIPPED = {"shipped": [], "shipped-2w": ["--workers", "2"]}
MODULES = {
    "uvicorn": "uvicorn",
    "uvicorn-h11": "h11",
    "granian": "granian",
    "granian-tuned": "granian",
    "granian-asgi-embedded": "granian",
    "hypercorn": "hypercorn",
}


def _job(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "research", "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "4", "cpu": "8"}},
                        }
                    ],
                }
            }
        },
    }


GOOD = {
    "gpufleet.io/team": "research",
    "gpufleet.io/model": "llama-3-8b",
    "gpufleet.io/data-class": "internal",
    "kueue.x-k8s.io/queue-name": "research",
}
OBJECTS = (_job(GOOD), _job({"gpufleet.io/team": "nlp"}))


def _review(obj: dict[str, Any], uid: str) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "namespace": "research",
            "operation": "CREATE",
            "object": obj,
        },
    }
    return json.dumps(review).encode()


BODIES = (_review(OBJECTS[0], "admitted"), _review(OBJECTS[1], "denied"))


def _request(body: bytes, close: bool) -> bytes:
    connection = "close" if close else "keep-alive"
    head = (
        f"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Connection: {connection}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"unexpected answer: {head[:60]!r}")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)


async def _client(port: int, context: ssl.SSLContext | None, stop_at: float, out: list[float], fresh: bool) -> None:
    """One client: keep-alive (one connection, review after review) or a new connection per review."""
    requests = [_request(b, close=fresh) for b in BODIES]
    i = 0
    if fresh:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
            await _exchange(reader, writer, requests[i % 2])
            writer.close()
            out.append(time.perf_counter() - started)
            i += 1
        return
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            await _exchange(reader, writer, requests[i % 2])
            out.append(time.perf_counter() - started)
            i += 1
    finally:
        writer.close()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (granian serves from a worker process)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _level(
    port: int, context: ssl.SSLContext | None, clients: int, seconds: float, pid: int, fresh: bool = False
) -> dict[str, float]:
    async def run(duration: float, out: list[float]) -> None:
        stop_at = time.perf_counter() + duration
        await asyncio.gather(*(_client(port, context, stop_at, out, fresh) for _ in range(clients)))

    asyncio.run(run(0.5, []))  # warm-up: connections, caches
    pids = _tree(pid)
    latencies: list[float] = []
    server_cpu, client_cpu = _cpu_seconds(pids), time.process_time()
    started = time.perf_counter()
    asyncio.run(run(seconds, latencies))
    elapsed = time.perf_counter() - started
    n = len(latencies)
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "clients": clients,
        "requests": n,
        "rps": n / elapsed,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
        "server_cpu_us": (_cpu_seconds(pids) - server_cpu) / n * 1e6,
        "client_cpu_us": (time.process_time() - client_cpu) / n * 1e6,
    }


def go_client() -> tuple[Path | None, str]:
    """The Go load generator, built on first use into a cache keyed by its source; or None and why not.

    Its source is in ``bench/webhook_load`` (standard library only, so it builds offline); the binary
    lives outside the repository, under ``$XDG_CACHE_HOME/gpufleet-bench`` (``~/.cache`` by default).
    """
    go = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if go is None:
        return None, f"Go not found (neither `go` on PATH nor {GO_FALLBACK}): the Go client rows are skipped"
    sources = [*sorted(LOAD.glob("*.go")), LOAD / "go.mod"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpufleet-bench"
    binary = cache / f"webhook_load-{digest}"
    if binary.exists():
        return binary, f"Go client {binary}"
    cache.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    built = subprocess.run(
        [go, "build", "-o", str(partial), "."], check=False, cwd=LOAD, env=env, capture_output=True, text=True
    )
    if built.returncode != 0:
        return None, f"building the Go client with {go} failed, its rows are skipped:\n{built.stderr.strip()}"
    partial.replace(binary)
    return binary, f"Go client built with {go} into {binary}"


def _go_level(
    binary: Path,
    port: int,
    ca: Path | None,
    bodies: list[Path],
    clients: int,
    seconds: float,
    pid: int,
    fresh: bool = False,
) -> dict[str, float]:
    """One row with the Go client: its own process, so its CPU is its own rusage over the window."""
    command = [str(binary), "-addr", f"127.0.0.1:{port}", "-clients", str(clients), "-seconds", str(seconds)]
    command += ["-ca", str(ca)] if ca else []
    command += ["-fresh"] if fresh else []
    for body in bodies:
        command += ["-body", str(body)]
    pids = _tree(pid)
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as load:
        assert load.stdout is not None
        lines = iter(load.stdout)
        if next(lines, "").strip() != "measuring":
            raise SystemExit(f"the Go client failed (exit {load.wait()})")
        server_cpu = _cpu_seconds(pids)
        if next(lines, "").strip() != "done":
            raise SystemExit(f"the Go client failed (exit {load.wait()})")
        server_cpu = _cpu_seconds(pids) - server_cpu
        figures = json.loads(next(lines))
    n = figures["requests"]
    return {
        "clients": clients,
        "requests": n,
        "rps": n / figures["seconds"],
        "p50_ms": figures["p50_ms"],
        "p99_ms": figures["p99_ms"],
        "server_cpu_us": server_cpu / n * 1e6,
        "client_cpu_us": figures["cpu_seconds"] / n * 1e6,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serving:
    """One candidate server as its own process, until the ``with`` block ends."""

    def __init__(self, name: str, certs: Path | None) -> None:
        self.name, self.port = name, _free_port()
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'bench'}"}
        tls = [str(certs / "tls.crt"), str(certs / "tls.key")] if certs else []
        if name in SHIPPED:
            if not certs:
                raise ValueError("gpufleet webhook serve always serves TLS")
            command = [sys.executable, "-m", "gpufleet", "webhook", "serve", str(POLICY), "--cert", tls[0]]
            command += ["--key", tls[1], "--host", "127.0.0.1", "--port", str(self.port), *SHIPPED[name]]
        else:
            command = [sys.executable, str(ROOT / "bench" / "webhook_servers.py"), name, str(POLICY), str(self.port)]
            command += tls
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self) -> Serving:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                time.sleep(0.3)  # a worker process may still be importing after the socket is bound
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit(f"the {self.name} server did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _cpu_per_call(call: Callable[[int], object], n: int = 3000) -> float:
    for i in range(200):
        call(i)
    started = time.process_time()
    for i in range(n):
        call(i)
    return (time.process_time() - started) / n * 1e6


def _parts() -> list[tuple[str, float]]:
    """CPU per review of the app's parts, called in this process (no network, no TLS)."""
    sys.path.insert(0, str(ROOT / "src"))
    from gpufleet.check.facts import admission_facts
    from gpufleet.check.rules import judge
    from gpufleet.policy import load_policy, resolve
    from gpufleet.webhook import review
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.telemetry import LOGGER, Metrics, configure_logging

    facts = admission_facts(resolve(load_policy(POLICY)))
    parsed = [review.parse(b) for b in BODIES]
    configure_logging("info", open(os.devnull, "w"))  # noqa: SIM115 (lives as long as the bench)
    logger = logging.getLogger(LOGGER)
    app = create_app(facts, Metrics())

    async def call(body: bytes) -> None:
        scope = {"type": "http", "method": "POST", "path": "/validate", "headers": []}
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return messages.pop() if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            return None

        await app(scope, receive, send)  # type: ignore[arg-type]

    def whole_app(n: int = 3000) -> float:
        async def many(count: int) -> None:
            for i in range(count):
                await call(BODIES[i % 2])

        asyncio.run(many(200))
        started = time.process_time()
        asyncio.run(many(n))
        return (time.process_time() - started) / n * 1e6

    fields: dict[str, Any] = {
        "endpoint": "validate",
        "uid": "u",
        "operation": "CREATE",
        "kind": "Job",
        "namespace": "research",
    }
    fields |= {"name": "train", "outcome": "denied", "details": ["MissingLabel"], "ms": 0.1}

    def log_line(i: int) -> None:  # as the app logs a review
        logger.handle(logger.makeRecord(LOGGER, logging.INFO, "", 0, "review", (), None, extra={"fields": fields}))

    handler = app.reviews["/validate"]  # what both interfaces (RSGI for granian, ASGI) call with the body
    rows = [
        ("JSON parse of the review (review.parse)", _cpu_per_call(lambda i: review.parse(BODIES[i % 2]))),
        ("the rules (judge)", _cpu_per_call(lambda i: judge(facts, parsed[i % 2].obj or {}, "research"))),
        ("one JSON log line (info)", _cpu_per_call(log_line)),
        ("the review handler, logging at info", _cpu_per_call(lambda i: handler(BODIES[i % 2], 0.0))),
        ("the whole app through ASGI, logging at info", whole_app()),
    ]
    logger.setLevel(logging.WARNING)
    rows.append(("the review handler, logging off", _cpu_per_call(lambda i: handler(BODIES[i % 2], 0.0))))
    return rows


def _row(label: str, client: str, r: dict[str, float]) -> str:
    return (
        f"{label:<24} {client:<6} {r['clients']:>4.0f} {r['requests']:>8.0f} {r['rps']:>7.0f} {r['p50_ms']:>7.2f}"
        f" {r['p99_ms']:>7.2f} {r['p99_ms'] / TARGET_P99_MS:>7.2f}x {r['p99_ms'] / BASELINE_P99_MS:>7.2f}x"
        f" {r['server_cpu_us']:>8.0f} {r['server_cpu_us'] / BASELINE_CPU_US:>6.2f}x {r['client_cpu_us']:>8.0f}"
    )


HEADER = (
    f"{'server / mode':<24} {'client':<6} {'cli':>4} {'requests':>8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7}"
    f" {'p99/5ms':>8} {'p99/14.4':>8} {'srv CPU':>8} {'/433us':>7} {'cli CPU':>8}"
)
Row = tuple[str, str, dict[str, float]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per row")
    parser.add_argument("--repeat", type=int, default=1, help="rounds over the candidates (the table keeps each)")
    parser.add_argument(
        "--servers",
        default="shipped,shipped-2w,granian-asgi-embedded,uvicorn,uvicorn-h11,granian,granian-tuned,hypercorn",
        help="candidates, comma-separated",
    )
    parser.add_argument(
        "--clients",
        default="go,python",
        help="load generators, comma-separated: go (bench/webhook_load, little CPU) and python (this process)",
    )
    args = parser.parse_args()
    names = [n for n in args.servers.split(",") if n]
    missing = [n for n in names if n in MODULES and importlib.util.find_spec(MODULES[n]) is None]
    names = [n for n in names if n not in missing]
    kinds = [k for k in args.clients.split(",") if k]
    if unknown := [k for k in kinds if k not in ("go", "python")]:
        raise SystemExit(f"--clients: unknown load generator {', '.join(unknown)}; expected go and/or python")
    binary, go_note = go_client() if "go" in kinds else (None, "")
    if binary is None:
        kinds = [k for k in kinds if k != "go"] or ["python"]
    try:
        import uvloop

        uvloop.install()  # the client's own cost, kept low
    except ImportError:
        pass
    from gpufleet.webhook.certs import Names, issue

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp, "certs")
        issue(certs, Names(("localhost",), ("127.0.0.1",)), secret_name="bench", namespace="bench")
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        bodies = [Path(tmp, f"{i}.json") for i in range(len(BODIES))]
        for path, body in zip(bodies, BODIES, strict=True):
            path.write_bytes(body)

        def level(kind: str, s: Serving, clients: int, tls: bool = True, fresh: bool = False) -> dict[str, float]:
            if kind == "go" and binary is not None:
                ca = certs / "ca.crt" if tls else None
                return _go_level(binary, s.port, ca, bodies, clients, args.seconds, s.process.pid, fresh)
            return _level(s.port, context if tls else None, clients, args.seconds, s.process.pid, fresh)

        for round_ in range(args.repeat):
            for name in names:
                with Serving(name, certs) as s:
                    for kind in kinds:
                        rows.append((name, kind, level(kind, s, CLIENTS)))
                    if name != "shipped" or round_ > 0:
                        continue
                    for n in (1, 64):
                        rows.append((name, kinds[0], level(kinds[0], s, n)))
                    rows.append((f"{name}, handshake/review", kinds[0], level(kinds[0], s, CLIENTS, fresh=True)))
        for name in [n for n in names if n not in SHIPPED]:
            with Serving(name, None) as s:
                rows.append((f"{name}, plain HTTP", kinds[0], level(kinds[0], s, CLIENTS, tls=False)))
    parts = _parts()
    cpus, load = os.cpu_count(), os.getloadavg()
    print(f"webhook /validate on loopback, {cpus} CPUs, {args.seconds:.0f} s per row; TLS 1.3 keep-alive unless named")
    print(
        f"load average (1, 5, 15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {cpus} CPUs:"
        " other work on the machine competes"
    )
    if go_note:
        print(go_note)
    if missing:
        print(f"not installed, skipped: {', '.join(missing)}")
    print(HEADER)
    for label, kind, r in rows:
        print(_row(label, kind, r))
    print("server CPU per review in µs (srv CPU) is user + system time of the server's processes / reviews;")
    print("cli CPU the load generator's own (go: its process; python: this process, which also runs the bench)")
    print()
    print("where the server's CPU goes (in-process, µs per review, the two Jobs alternating):")
    for label, us in parts:
        print(f"  {label:<40} {us:>7.1f}")
    _medians(rows, args.repeat)


def _medians(rows: list[Row], repeat: int) -> None:
    by_server: dict[tuple[str, str], list[dict[str, float]]] = {}
    for label, kind, r in rows:
        if r["clients"] == CLIENTS and "," not in label:
            by_server.setdefault((label, kind), []).append(r)
    print()
    print(f"median over {repeat} round(s) at {CLIENTS} clients, TLS keep-alive:")
    print(
        f"{'server':<16} {'client':<6} {'p50 ms':>7} {'p99 ms':>7} {'p99/5ms':>8} {'p99/14.4':>9}"
        f" {'srv CPU us':>10} {'/433us':>7} {'cli CPU us':>10}"
    )
    medians = {}
    for (name, kind), rs in by_server.items():
        keys = ("p50_ms", "p99_ms", "server_cpu_us", "client_cpu_us")
        m = {k: statistics.median(r[k] for r in rs) for k in keys}
        medians[name, kind] = m
        print(
            f"{name:<16} {kind:<6} {m['p50_ms']:>7.2f} {m['p99_ms']:>7.2f} {m['p99_ms'] / TARGET_P99_MS:>7.2f}x"
            f" {m['p99_ms'] / BASELINE_P99_MS:>8.2f}x {m['server_cpu_us']:>10.0f}"
            f" {m['server_cpu_us'] / BASELINE_CPU_US:>6.2f}x {m['client_cpu_us']:>10.0f}"
        )
    for (name, kind), m in medians.items():
        if name not in SHIPPED:
            continue
        verdict = "meets" if m["p99_ms"] < TARGET_P99_MS else "misses"
        command = " ".join(["gpufleet webhook serve", *SHIPPED[name]])
        print(
            f"{name} ({command}), {kind} client: p99 {m['p99_ms']:.2f} ms = "
            f"{m['p99_ms'] / TARGET_P99_MS:.2f}x the 5 ms target ({verdict} it), {m['p99_ms'] / BASELINE_P99_MS:.2f}x"
            f" the 14.4 ms baseline; server CPU {m['server_cpu_us']:.0f} µs per review = "
            f"{m['server_cpu_us'] / BASELINE_CPU_US:.2f}x the 433 µs baseline"
        )
    for kind in sorted({k for _, k in medians}):
        mine = {n: m for (n, k), m in medians.items() if k == kind}
        cpu = min(mine, key=lambda n: mine[n]["server_cpu_us"])
        p99 = min(mine, key=lambda n: mine[n]["p99_ms"])
        print(f"{kind} client: least server CPU per review: {cpu}; lowest p99: {p99}")


if __name__ == "__main__":
    main()
