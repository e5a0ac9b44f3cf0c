"""The recorder publishes signed checkpoints of the ledger outside the database.

A checkpoint only protects what it was published for, and only if it lives where the database's
writers cannot rewrite it: a file on another volume, a ConfigMap, or the recorder's log (collected
elsewhere). Every ``every_entries`` new entries, or every ``every_seconds`` while entries keep
arriving, the leader signs the tree head and writes it to each target. Before it signs, it checks
that the new tree extends the last checkpoint it published and the one each ConfigMap target holds
(a consistency proof from the stored tree): a ledger rewritten under a running recorder, or while it
was down, is reported in the log instead of being signed.

Targets (``--checkpoint-to``, repeatable):

- ``file:PATH``: written atomically (a reader sees the old checkpoint or the new one, never half);
- ``configmap:NAMESPACE/NAME``: the key ``checkpoint`` of that ConfigMap holds the latest signed note,
  exactly as ``audit verify --checkpoint`` reads it (``kubectl get configmap NAME -o
  jsonpath='{.data.checkpoint}'``). Created when missing, otherwise replaced carrying the
  resourceVersion it was read at (a conflict re-reads and re-checks). Only the latest is kept: it
  pins every entry the earlier ones pinned, because each was checked to extend the one before;
- ``log``: one log line ``checkpoint <JSON string of the signed note>``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet import kube
from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.ledger import merkle, note, proofs
from gpufleet.ledger.checkpoint import Checkpoint
from gpufleet.ledger.store import Ledger
from gpufleet.recorder.metrics import Metrics

log = logging.getLogger("gpufleet.recorder.checkpoint")

CONFIGMAP_KEY = "checkpoint"  # the data key of a ConfigMap target
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a namespace: an RFC 1123 label
_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_CONFLICT_RETRIES = 3
_LABELS = {"app.kubernetes.io/part-of": "gpufleet", "app.kubernetes.io/managed-by": "gpufleet"}


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
        if kind == "configmap" and sep:
            namespace, slash, name = where.partition("/")
            if not (slash and _LABEL.fullmatch(namespace) and _SUBDOMAIN.fullmatch(name)):
                raise InputError.one(
                    f"expected configmap:NAMESPACE/NAME with Kubernetes names (lower case, digits, '-'), got {value!r}",
                    path="--checkpoint-to",
                )
            targets.append(value)
            continue
        raise InputError.one(
            f"expected file:PATH, configmap:NAMESPACE/NAME or log, got {value!r}", path="--checkpoint-to"
        )
    return tuple(targets) or ("log",)


def _configmap(target: str) -> tuple[str, str] | None:
    """(namespace, name) of a ``configmap:`` target, else None."""
    kind, _, where = target.partition(":")
    if kind != "configmap":
        return None
    namespace, _, name = where.partition("/")
    return namespace, name


class Publisher:
    """Signs and writes checkpoints; remembers the last one to check that the next extends it.

    ``kubeconfig`` / ``in_cluster`` choose the cluster of ConfigMap targets, as for the recorder's
    watches (a synchronous client, made when first needed: ``publish`` runs in a worker thread)."""

    def __init__(
        self,
        policy: CheckpointPolicy,
        signer: note.SignerKey,
        metrics: Metrics,
        *,
        kubeconfig: str | None = None,
        in_cluster: bool = False,
    ) -> None:
        self.policy, self.signer, self.metrics = policy, signer, metrics
        self.origin = policy.origin or signer.name
        self.last: tuple[int, bytes] | None = None
        self.last_at = time.monotonic()
        self.lock = asyncio.Lock()
        self._kubeconfig, self._in_cluster = kubeconfig, in_cluster
        self._api: Any = None

    def _cluster(self) -> Any:
        if self._api is None:
            self._api = kube.configmap_client(self._kubeconfig, in_cluster=self._in_cluster)
        return self._api

    def _mine(self, signed: str, where: str) -> tuple[int, bytes] | None:
        """(size, root) of a checkpoint this key signed for this origin; None for anything else."""
        from gpufleet.ledger import checkpoint as checkpoints

        try:
            cp, text, signatures = checkpoints.parse(signed, where)
        except InputError as exc:
            log.warning("ignoring the previous checkpoint in %s: %s", where, exc)
            return None
        if note.signed_by(text, signatures, self.signer.verifier) and cp.origin == self.origin:
            return cp.size, cp.root
        return None

    def _remember(self, found: tuple[int, bytes] | None) -> None:
        if found is not None and (self.last is None or found[0] > self.last[0]):
            self.last = found

    def resume(self) -> None:
        """After a restart: the newest checkpoint in a file or ConfigMap target, if this key signed it,
        is the one the next must extend, so a ledger rewritten while the recorder was down is not signed."""
        for target in self.policy.targets:
            if target == "log":
                continue
            where = _configmap(target)
            if where is not None:
                held = self._held(where)
                if held.error is not None:
                    log.warning("cannot read the previous checkpoint in %s: %s", held.shown, held.error)
                self._remember(held.previous)
                continue
            path = Path(target.partition(":")[2])
            if not path.is_file():
                continue
            try:
                self._remember(self._mine(path.read_text(encoding="utf-8"), str(path)))
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("ignoring the previous checkpoint %s: %s", path, exc)

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

    def _extends(self, ledger: Ledger, old: tuple[int, bytes], size: int, root: bytes, where: str) -> bool:
        old_size, old_root = old
        proof = proofs.consistency(ledger, old_size, size) if old_size <= size else []
        if old_size > size or not merkle.verify_consistency(old_size, size, old_root, root, proof):
            log.error(
                "NOT publishing: the ledger (size %d) does not extend the checkpoint %s at size %d;"
                " it was rewritten or truncated under the recorder",
                size,
                where,
                old_size,
            )
            return False
        return True

    def publish(self, ledger: Ledger) -> Checkpoint | None:
        size, root = ledger.tree_head()
        if self.last is not None and not self._extends(ledger, self.last, size, root, "published last"):
            return None
        held: dict[tuple[str, str], _Held] = {}
        for target in self.policy.targets:  # every anchor is checked before anything is signed
            where = _configmap(target)
            if where is not None:
                held[where] = self._held(where)
                found = held[where].previous
                if found is not None and not self._extends(ledger, found, size, root, held[where].shown):
                    return None
        checkpoint = Checkpoint(self.origin, size, root)
        signed = checkpoint.signed(self.signer)
        everywhere = True
        for target in self.policy.targets:
            where = _configmap(target)
            if target == "log":
                log.info("checkpoint %s", json.dumps(signed, ensure_ascii=False))
            elif where is not None:
                everywhere = self._to_configmap(ledger, held[where], size, root, signed) and everywhere
            else:
                write_text(Path(target.partition(":")[2]), signed)
        self.last, self.last_at = (size, root), time.monotonic()  # signed: the next must extend it
        if everywhere:
            self.metrics.last_checkpoint.set(time.time())
            self.metrics.checkpoint_size.set(size)
        return checkpoint

    def _held(self, where: tuple[str, str]) -> _Held:
        """What a ConfigMap target holds now: the object (None when missing or unreadable) and the
        checkpoint in it if this key signed it."""
        shown = f"configmap {where[0]}/{where[1]}"
        try:
            found = kube.read_configmap(self._cluster(), *where)
        except (kube.ConnectionLost, kube.WriteRefused) as exc:
            return _Held(where, shown, None, None, str(exc))
        text = ((found or {}).get("data") or {}).get(CONFIGMAP_KEY)
        return _Held(where, shown, found, self._mine(text, shown) if isinstance(text, str) else None)

    def _to_configmap(self, ledger: Ledger, held: _Held, size: int, root: bytes, signed: str) -> bool:
        """Write the checkpoint into the ConfigMap, carrying the resourceVersion it was read at; on a
        conflict re-read and re-check. An unreachable or refusing API server is logged, not fatal:
        the recorder keeps recording, the next checkpoint tries again, and the checkpoint metrics stay
        where they were, so ``GpufleetLedgerCheckpointStale`` tells when it keeps failing."""
        for attempt in range(_CONFLICT_RETRIES):
            if held.error is not None:
                log.error("cannot write the checkpoint to %s: %s", held.shown, held.error)
                return False
            if (
                attempt
                and held.previous is not None
                and not self._extends(ledger, held.previous, size, root, held.shown)
            ):
                return False
            found = held.found
            body: dict[str, Any] = found or {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": held.where[1], "namespace": held.where[0], "labels": dict(_LABELS)},
            }
            body["data"] = {**((found or {}).get("data") or {}), CONFIGMAP_KEY: signed}
            try:
                if kube.write_configmap(self._cluster(), body):
                    return True
            except (kube.ConnectionLost, kube.WriteRefused) as exc:
                log.error("cannot write the checkpoint to %s: %s", held.shown, exc)
                return False
            held = self._held(held.where)
        log.error("cannot write the checkpoint to %s: %d conflicting writes in a row", held.shown, _CONFLICT_RETRIES)
        return False


@dataclass(frozen=True)
class _Held:
    where: tuple[str, str]
    shown: str
    found: dict[str, Any] | None
    previous: tuple[int, bytes] | None
    error: str | None = None
