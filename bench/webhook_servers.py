"""The server candidates ``webhook_bench`` runs side by side, each serving gpufleet's own webhook app.

Run one: ``python bench/webhook_servers.py NAME POLICY PORT [CERT KEY]`` (no CERT/KEY: plain HTTP, to
measure what TLS costs). Every candidate serves the same ASGI app (``gpufleet.webhook.app``) with its
logs at info level, as ``gpufleet webhook serve`` does; only the HTTP and TLS machinery differs:

- ``uvicorn``: uvicorn on uvloop with httptools (what ``gpufleet webhook serve`` ran before granian);
- ``uvicorn-h11``: uvicorn on the standard asyncio loop with the pure-Python h11 parser;
- ``granian``: granian's Rust HTTP and TLS (rustls) with its ASGI interface, one worker process
  (``gpufleet webhook serve`` embeds granian in its own process instead: the ``shipped`` row);
- ``granian-tuned``: the same with HTTP/1.1 only, no lifespan, a single-threaded Rust runtime and
  granian's Rust task implementation;
- ``granian-asgi-embedded``: granian embedded in the process as ``gpufleet webhook serve`` runs it,
  but calling the app through ASGI (what it shipped with before RSGI): the two rows side by side
  show what the interface costs;
- ``hypercorn``: hypercorn on uvloop, where it is installed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ENV_POLICY = "GPUFLEET_BENCH_POLICY"
CANDIDATES = ("uvicorn", "uvicorn-h11", "granian", "granian-tuned", "granian-asgi-embedded", "hypercorn")


def app() -> Any:
    """The webhook app for the policy in ``$GPUFLEET_BENCH_POLICY`` (a factory: granian imports it)."""
    from gpufleet.check.facts import admission_facts
    from gpufleet.policy import load_policy, resolve
    from gpufleet.webhook.app import create_app
    from gpufleet.webhook.telemetry import configure_logging

    configure_logging("info")
    return create_app(admission_facts(resolve(load_policy(Path(os.environ[ENV_POLICY])))))


def _uvicorn(port: int, tls: dict[str, str], loop: str, http: str) -> None:
    import uvicorn

    config = uvicorn.Config(
        app(),
        host="127.0.0.1",
        port=port,
        loop=loop,
        http=http,
        log_config=None,
        access_log=False,
        lifespan="off",
        ssl_certfile=tls.get("cert"),
        ssl_keyfile=tls.get("key"),
    )
    uvicorn.Server(config).run()


def _granian(port: int, tls: dict[str, str], tuned: bool = False) -> None:
    from granian.constants import HTTPModes, Interfaces, Loops, RuntimeModes, TaskImpl
    from granian.server import Server

    extra: dict[str, Any] = {"ssl_cert": Path(tls["cert"]), "ssl_key": Path(tls["key"])} if tls else {}
    if tuned:  # HTTP/1.1 only, no lifespan, one Rust thread, the Rust task implementation
        extra |= {"http": HTTPModes.http1, "runtime_mode": RuntimeModes.st, "task_impl": TaskImpl.rust}
        extra |= {"interface": Interfaces.ASGINL}
    Server(
        f"{Path(__file__).stem}:app",
        address="127.0.0.1",
        port=port,
        factory=True,
        workers=1,
        loop=Loops.uvloop,
        log_enabled=False,
        log_access=False,
        **({"interface": Interfaces.ASGI} | extra),
    ).serve()


def _granian_asgi_embedded(port: int, tls: dict[str, str]) -> None:
    import uvloop
    from granian.constants import Interfaces
    from granian.server.embed import Server

    extra: dict[str, Any] = {"ssl_cert": Path(tls["cert"]), "ssl_key": Path(tls["key"])} if tls else {}
    server = Server(
        app(), address="127.0.0.1", port=port, interface=Interfaces.ASGINL, websockets=False, log_enabled=False, **extra
    )
    uvloop.run(server.serve())


def _hypercorn(port: int, tls: dict[str, str]) -> None:
    import uvloop
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    if tls:
        config.certfile, config.keyfile = tls["cert"], tls["key"]
    uvloop.run(serve(app(), config))


def main() -> None:
    name, policy, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tls = {"cert": sys.argv[4], "key": sys.argv[5]} if len(sys.argv) > 5 else {}
    os.environ[ENV_POLICY] = str(Path(policy).resolve())
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if name == "uvicorn":
        _uvicorn(port, tls, "uvloop", "httptools")
    elif name == "uvicorn-h11":
        _uvicorn(port, tls, "asyncio", "h11")
    elif name == "granian":
        _granian(port, tls)
    elif name == "granian-tuned":
        _granian(port, tls, tuned=True)
    elif name == "granian-asgi-embedded":
        _granian_asgi_embedded(port, tls)
    elif name == "hypercorn":
        _hypercorn(port, tls)
    else:
        raise SystemExit(f"unknown server {name!r}; one of {', '.join(CANDIDATES)}")


if __name__ == "__main__":
    main()
