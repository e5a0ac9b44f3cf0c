"""Where the webhook listens, and its key pair renewed in place, for either server.

cert-manager (or ``gpufleet webhook certs --renew``) renews the certificate in place (a Secret volume
swaps its files), so both servers poll the files' modification times. A new pair is first loaded
into a throwaway SSLContext: only a pair that loads is served; a half-written one is looked at again
on the next tick while the old certificate keeps serving.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from gpufleet.webhook.telemetry import LOGGER

log = logging.getLogger(LOGGER)
RELOAD_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Listen:
    """The address, the key pair, and how often to look for a renewed pair."""

    cert: Path
    key: Path
    host: str = "127.0.0.1"
    port: int = 8443
    reload_seconds: float = RELOAD_SECONDS


def file_stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    """What tells a renewed file: its modification time and size ((-1, -1) while it is missing)."""
    out = []
    for path in paths:
        try:
            st = path.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((-1, -1))
    return tuple(out)


def loads(cert: Path, key: Path) -> str | None:
    """Why the pair does not load as a TLS server's certificate, or None when it does."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        return str(exc)
    return None


class Renewal:
    """Tells when the files on disk became a new pair that loads; logs what it finds."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self.reloads = 0
        self._seen = file_stamp(cert, key)

    def loadable(self) -> bool:
        error = loads(self.cert, self.key)
        if error is not None:
            log.warning("certificate not reloaded", extra={"fields": {"cert": str(self.cert), "error": error}})
        return error is None

    def renewed(self) -> bool:
        """True, once, when the files changed into a pair that loads: the caller serves it then."""
        now = file_stamp(self.cert, self.key)
        if now == self._seen or not self.loadable():
            return False
        self._seen = now
        return True

    def reloaded(self) -> None:
        self.reloads += 1
        log.info("certificate reloaded", extra={"fields": {"cert": str(self.cert), "reloads": self.reloads}})
