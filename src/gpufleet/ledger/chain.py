"""The hash chain: how each ledger entry is sealed, and how a verifier finds the first bad one.

Every entry stores three hashes (hex SHA-256):

- ``record_hash`` = sha256(canonical text): detects a changed body;
- ``prev_hash``   = the previous entry's ``record_hash`` (64 zeros for the first): each entry names
  its predecessor, which is what lets a verifier tell a deleted, inserted or reordered entry apart;
- ``chain_hash``  = sha256(previous chain_hash + record_hash): a running seal over the whole
  history, so the head alone vouches for every entry before it (publish it to anchor the ledger).

The verifier walks entries in ``seq`` order and stops at the first inconsistency, naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

GENESIS = "0" * 64


def record_hash(canonical_text: str) -> str:
    return hashlib.sha256(canonical_text.encode()).hexdigest()


def chain_hash(prev_chain: str, rec_hash: str) -> str:
    return hashlib.sha256((prev_chain + rec_hash).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored ledger row, as the verifier sees it."""

    seq: int
    record_key: str
    body: str
    record_hash: str
    prev_hash: str
    chain_hash: str


class Tampering(StrEnum):
    """What the verifier found (machine reasons)."""

    CHANGED = "Changed"
    DELETED = "Deleted"
    INSERTED = "Inserted"
    REORDERED = "Reordered"
    CHANGED_OR_DELETED = "ChangedOrDeleted"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Tampering
    seq: int
    record_key: str
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    entries: int
    head: str  # the last good chain hash
    finding: Finding | None

    @property
    def ok(self) -> bool:
        return self.finding is None


def seal(entries_before: tuple[str, str], canonical_text: str) -> tuple[str, str, str]:
    """(record_hash, prev_hash, chain_hash) for a new entry after (prev record_hash, prev chain_hash)."""
    prev_record, prev_chain = entries_before
    rh = record_hash(canonical_text)
    return rh, prev_record, chain_hash(prev_chain, rh)


def verify(entries: Iterable[Entry], seq_of_record_hash: Callable[[str], int | None]) -> Verdict:
    """Check the chain; ``seq_of_record_hash`` finds where a hash lives (used only once a link breaks)."""
    prev_record, prev_chain = GENESIS, GENESIS
    prev: Entry | None = None
    expected_seq = 1
    count = 0
    for entry in entries:
        finding = _check(
            entry,
            prev,
            prev_record=prev_record,
            prev_chain=prev_chain,
            expected_seq=expected_seq,
            seq_of_record_hash=seq_of_record_hash,
        )
        if finding is not None:
            return Verdict(count, prev_chain, finding)
        prev_record, prev_chain = entry.record_hash, entry.chain_hash
        prev, expected_seq, count = entry, entry.seq + 1, count + 1
    return Verdict(count, prev_chain, None)


def _check(
    entry: Entry,
    prev: Entry | None,
    *,
    prev_record: str,
    prev_chain: str,
    expected_seq: int,
    seq_of_record_hash: Callable[[str], int | None],
) -> Finding | None:
    def found(kind: Tampering, seq: int, key: str, message: str) -> Finding:
        return Finding(kind, seq, key, message)

    if record_hash(entry.body) != entry.record_hash:
        return found(
            Tampering.CHANGED, entry.seq, entry.record_key, "its content no longer matches its recorded hash"
        )
    if entry.prev_hash != prev_record:
        if prev is not None and entry.prev_hash == prev.prev_hash:
            return found(
                Tampering.INSERTED,
                prev.seq,
                prev.record_key,
                f"it was inserted: entry {entry.seq} names the entry before it as its predecessor",
            )
        origin = seq_of_record_hash(entry.prev_hash)
        if origin is not None:
            return found(
                Tampering.REORDERED,
                entry.seq,
                entry.record_key,
                f"it was moved: it was written right after entry {origin}",
            )
        if entry.seq != expected_seq:
            return found(
                Tampering.DELETED,
                entry.seq,
                entry.record_key,
                f"entries {expected_seq}..{entry.seq - 1} before it were deleted",
            )
        return found(
            Tampering.CHANGED_OR_DELETED,
            entry.seq,
            entry.record_key,
            "the entry it was written after is gone: the one before it was rewritten, or deleted"
            " and the sequence renumbered",
        )
    if entry.seq != expected_seq:
        kind = Tampering.DELETED if entry.seq > expected_seq else Tampering.INSERTED
        return found(
            kind, entry.seq, entry.record_key, f"sequence number {entry.seq}, expected {expected_seq}"
        )
    if chain_hash(prev_chain, entry.record_hash) != entry.chain_hash:
        return found(
            Tampering.CHANGED,
            entry.seq,
            entry.record_key,
            "its chain hash does not follow from the entries before it (hashes were rewritten)",
        )
    return None
