"""Inclusion and consistency proofs from the stored tree, without rehashing the ledger.

A proof is a list of subtree hashes (``merkle.inclusion_ranges`` / ``consistency_ranges`` say which
leaf ranges). Each range is made of complete nodes: those from level ``schema.TREE_STORED_FROM`` up
come from ``ledger_tree`` in one query per level, the lower ones are rehashed from at most 16
bodies each. So a proof costs a few small queries and about 4 log n hashes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.errors import InputError
from gpufleet.ledger import merkle, schema
from gpufleet.ledger.store import Ledger


def hashes(ledger: Ledger, ranges: list[merkle.Range]) -> list[bytes]:
    """MTH of each leaf range, from the stored nodes and, below them, the bodies."""
    nodes = {n for start, end in ranges for n in merkle.nodes_of(start, end)}
    stored = ledger.stored_nodes({n for n in nodes if n[0] >= schema.TREE_STORED_FROM})
    bodies = ledger.leaf_data(merkle.leaves_needed(nodes, schema.TREE_STORED_FROM))
    missing = sorted(n for n in nodes if n[0] >= schema.TREE_STORED_FROM and n not in stored)
    if missing:
        level, index = missing[0]
        raise InputError.one(
            f"the stored Merkle tree lacks node (level {level}, index {index}): run `gpufleet audit verify`",
            path="--ledger",
        )
    leaf_cache: dict[int, bytes] = {}

    def leaf(index: int) -> bytes:
        if index not in leaf_cache:
            if index not in bodies:
                raise InputError.one(f"the ledger has no entry {index + 1}", path="--ledger")
            leaf_cache[index] = merkle.leaf_hash(bodies[index])
        return leaf_cache[index]

    def node(level: int, index: int) -> bytes:
        if level >= schema.TREE_STORED_FROM:
            return stored[(level, index)]
        return merkle.node_from_leaves(level, index, leaf)

    return [merkle.range_hash(start, end, node) for start, end in ranges]


def consistency(ledger: Ledger, m: int, n: int) -> list[bytes]:
    """PROOF(m, D[n]): the tree of ``m`` leaves is a prefix of the tree of ``n``."""
    return hashes(ledger, merkle.consistency_ranges(m, n))


def inclusion(ledger: Ledger, index: int, size: int) -> list[bytes]:
    """PATH(index, D[size]): leaf ``index`` (entry ``index + 1``) is in the tree of ``size`` leaves."""
    return hashes(ledger, merkle.inclusion_ranges(index, size))


@dataclass(frozen=True, slots=True)
class Inclusion:
    """One entry, proven to be in the tree of ``size`` leaves."""

    seq: int
    record_key: str
    body: str
    leaf: bytes
    proof: list[bytes]

    @property
    def index(self) -> int:
        return self.seq - 1


def inclusions(ledger: Ledger, seqs: list[int], size: int) -> list[Inclusion]:
    """Inclusion proofs of the entries ``seqs`` (each at most ``size``) in the tree of ``size``."""
    all_ranges = [merkle.inclusion_ranges(s - 1, size) for s in seqs]
    flat = hashes(ledger, [r for ranges in all_ranges for r in ranges])
    bodies = ledger.leaf_data({s - 1 for s in seqs})
    keys = ledger.record_keys(seqs)
    found: list[Inclusion] = []
    at = 0
    for seq, ranges in zip(seqs, all_ranges, strict=True):
        data = bodies[seq - 1]
        found.append(Inclusion(seq, keys[seq], data.decode(), merkle.leaf_hash(data), flat[at : at + len(ranges)]))
        at += len(ranges)
    return found
