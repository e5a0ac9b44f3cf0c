"""The recorder publishes signed checkpoints of the ledger outside the database.

A checkpoint only protects what it was published for, and only if it lives where the database's
writers cannot rewrite it: a file on another volume, or the recorder's log (collected elsewhere).
Every ``every_entries`` new entries, or every ``every_seconds`` while entries keep arriving, the
leader signs the tree head and writes it to each target. Before it publishes, it checks that the
new tree extends the last one it published (a consistency proof from the stored tree): a ledger
rewritten under a running recorder is reported in the log instead of being signed.

Targets (``--checkpoint-to``, repeatable):

- ``file:PATH``: written atomically (a reader sees the old checkpoint or the new one, never half);
- ``log``: one log line ``checkpoint <JSON string of the signed note>``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.ledger import merkle, note, proofs
from gpufleet.ledger.checkpoint import Checkpoint
from gpufleet.ledger.store import Ledger
from gpufleet.recorder.metrics import Metrics

log = logging.getLogger("gpufleet.recorder.checkpoint")


@dataclass(frozen=True)
class CheckpointPolicy:
    """Where and how often the recorder publishes checkpoints (``record --checkpoint-*``)."""

    key: Path
    targets: tuple[str, ...] = ("log",)
    every_entries: int = 1000
    every_seconds: float = 300.0
    origin: str | None = None


def parse_targets(values: list[str]) -> tuple[str, ...]:
    """Check ``--checkpoint-to`` values up front, so a typo fails before the recorder starts."""
    targets: list[str] = []
    for value in values:
        kind, sep, where = value.partition(":")
        if value == "log" or (kind == "file" and sep and where):
            targets.append(value)
            continue
        raise InputError.one(f"expected file:PATH or log, got {value!r}", path="--checkpoint-to")
    return tuple(targets) or ("log",)


class Publisher:
    """Signs and writes checkpoints; remembers the last one to check that the next extends it."""

    def __init__(self, policy: CheckpointPolicy, signer: note.SignerKey, metrics: Metrics) -> None:
        self.policy, self.signer, self.metrics = policy, signer, metrics
        self.origin = policy.origin or signer.name
        self.last: tuple[int, bytes] | None = None
        self.last_at = time.monotonic()
        self.lock = asyncio.Lock()

    def resume(self) -> None:
        """After a restart: the newest checkpoint in a file target, if this key signed it, is the one
        the next must extend, so a ledger rewritten while the recorder was down is not signed."""
        from gpufleet.ledger import checkpoint as checkpoints

        for target in self.policy.targets:
            path = Path(target.partition(":")[2])
            if target == "log" or not path.is_file():
                continue
            try:
                cp, text, signatures = checkpoints.parse(path.read_text(encoding="utf-8"), str(path))
            except (InputError, OSError, UnicodeDecodeError) as exc:
                log.warning("ignoring the previous checkpoint %s: %s", path, exc)
                continue
            mine = note.signed_by(text, signatures, self.signer.verifier) and cp.origin == self.origin
            if mine and (self.last is None or cp.size > self.last[0]):
                self.last = (cp.size, cp.root)

    def due(self, size: int) -> bool:
        if self.last is None:
            return True
        grown = size - self.last[0]
        return grown >= self.policy.every_entries or (
            grown > 0 and time.monotonic() - self.last_at >= self.policy.every_seconds
        )

    async def maybe_publish(self, ledger: Ledger, size: int) -> None:
        if self.due(size):
            async with self.lock:
                if self.due(size):
                    await asyncio.to_thread(self.publish, ledger)

    async def run(self, ledger: Ledger) -> None:
        """Publish on the time condition too, for a ledger that grows slowly."""
        interval = max(0.5, min(self.policy.every_seconds / 4, 15.0))
        while True:
            size, _ = await asyncio.to_thread(ledger.tree_head)
            await self.maybe_publish(ledger, size)
            await asyncio.sleep(interval)

    def publish(self, ledger: Ledger) -> Checkpoint | None:
        size, root = ledger.tree_head()
        if self.last is not None:
            old_size, old_root = self.last
            proof = proofs.consistency(ledger, old_size, size) if old_size <= size else []
            if old_size > size or not merkle.verify_consistency(old_size, size, old_root, root, proof):
                log.error(
                    "NOT publishing: the ledger (size %d) does not extend the checkpoint published at size %d;"
                    " it was rewritten or truncated under the recorder",
                    size,
                    old_size,
                )
                return None
        checkpoint = Checkpoint(self.origin, size, root)
        signed = checkpoint.signed(self.signer)
        for target in self.policy.targets:
            if target == "log":
                log.info("checkpoint %s", json.dumps(signed, ensure_ascii=False))
            else:
                write_text(Path(target.partition(":")[2]), signed)
        self.last, self.last_at = (size, root), time.monotonic()
        self.metrics.last_checkpoint.set(time.time())
        self.metrics.checkpoint_size.set(size)
        return checkpoint
