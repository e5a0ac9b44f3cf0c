"""A throwaway PostgreSQL server for tests and benchmarks: Debian's real server binaries on loopback.

Runs ``initdb`` and ``pg_ctl`` from ``/usr/lib/postgresql/<version>/bin`` in a temporary
directory (as the ``postgres`` user when we are root, since the server refuses to run as root),
listening on 127.0.0.1 only, with fsync off because the data is thrown away.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg


def find_bin_dir() -> Path | None:
    """The newest installed server's bin directory, or None when no server is installed."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[-3]))
    if candidates:
        return candidates[-1].parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server, yield a base URL ``postgresql://postgres@127.0.0.1:PORT``, stop it at the end."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server binaries (install the Debian package 'postgresql')")
    root = Path(tempfile.mkdtemp(prefix="gpufleet-pg-"))
    data = root / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync"],
        check=True,
        capture_output=True,
    )
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off"
        " -c full_page_writes=off -c max_connections=50"
    )
    subprocess.run(
        [
            *prefix,
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(root / "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


def create_database(base_url: str, name: str) -> str:
    """Create (or recreate) an empty database and return its URL."""
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base_url}/{name}"
