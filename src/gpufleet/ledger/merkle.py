"""The ledger's Merkle tree (RFC 9162 §2.1): hashes, the right frontier, and both kinds of proof.

Pure functions over 32-byte hashes; no database. The tree over n leaves is the RFC's:

- a leaf hashes as SHA-256(0x00 || data), an inner node as SHA-256(0x01 || left || right);
- a tree of n > 1 leaves splits at k, the largest power of two smaller than n: its hash is
  node(MTH(D[0:k]), MTH(D[k:n])); the empty tree hashes as SHA-256("").

Every subtree the RFC's split produces on its left is *complete and aligned*: 2^level leaves
starting at a multiple of 2^level. Such a node is named ``(level, index)`` and never changes once
its last leaf exists, which is what lets the store keep them and answer proofs without rehashing.
The *frontier* of a tree is its complete subtrees along the right edge (one per set bit of n);
appending a leaf only touches the frontier, so a root costs log n hashes, not n.

Proofs are computed in two steps so the store can fetch every node it needs in one query: first
the ranges [start, end) whose hashes make up the proof (``inclusion_ranges``,
``consistency_ranges``), then their hashes from complete nodes (``nodes_of`` / ``range_hash``).
The verifiers are RFC 9162 §2.1.3.2 and §2.1.4.2 step by step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

Node = tuple[int, int]  # (level, index): leaves [index * 2**level, (index + 1) * 2**level)
Range = tuple[int, int]  # [start, end) of leaf indices


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(n: int) -> int:
    """The largest power of two smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of leaf hashes, straight from the RFC's recursive definition (the reference)."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = split(len(leaves))
    return node_hash(root_of(leaves[:k]), root_of(leaves[k:]))


@dataclass
class Frontier:
    """The right edge of a tree of ``size`` leaves: complete subtree hashes, highest level first."""

    size: int = 0
    hashes: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.hashes) != self.size.bit_count():
            raise ValueError(
                f"a frontier of {self.size} leaves has {self.size.bit_count()} hashes, not {len(self.hashes)}"
            )

    @classmethod
    def unpack(cls, size: int, packed: bytes) -> Frontier:
        return cls(size, [packed[i : i + HASH_SIZE] for i in range(0, len(packed), HASH_SIZE)])

    def pack(self) -> bytes:
        return b"".join(self.hashes)

    def append(self, leaf: bytes, completed: Callable[[int, int, bytes], None] | None = None) -> None:
        """Add one leaf hash; ``completed(level, index, hash)`` hears of every node it completes."""
        h, level, index = leaf, 0, self.size
        if completed is not None:
            completed(0, index, h)
        while index & 1:  # the left sibling at this level is complete: merge
            h = node_hash(self.hashes.pop(), h)
            level, index = level + 1, index >> 1
            if completed is not None:
                completed(level, index, h)
        self.hashes.append(h)
        self.size += 1

    def extend(self, leaves: Iterable[bytes], stored_from: int) -> list[tuple[int, int, bytes]]:
        """``append`` each leaf hash; return the (level, index, hash) of every node completed at
        ``stored_from`` or above (what the store keeps). The append path's loop, without a call per level."""
        hashes, size = self.hashes, self.size
        kept: list[tuple[int, int, bytes]] = []
        for leaf in leaves:
            h, level, index = leaf, 0, size
            if stored_from <= 0:
                kept.append((0, index, h))
            while index & 1:  # the left sibling at this level is complete: merge
                h = node_hash(hashes.pop(), h)
                level, index = level + 1, index >> 1
                if level >= stored_from:
                    kept.append((level, index, h))
            hashes.append(h)
            size += 1
        self.size = size
        return kept

    def root(self) -> bytes:
        if not self.hashes:
            return EMPTY_ROOT
        h = self.hashes[-1]
        for left in reversed(self.hashes[:-1]):
            h = node_hash(left, h)
        return h

    def copy(self) -> Frontier:
        return Frontier(self.size, list(self.hashes))


def frontier_nodes(size: int) -> list[Node]:
    """The complete nodes on the right edge of a tree of ``size`` leaves, highest level first."""
    nodes: list[Node] = []
    start = 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            nodes.append((level, start >> level))
            start += 1 << level
    return nodes


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """PATH(index, D[size]) as leaf ranges, the leaf's sibling first (RFC 9162 §2.1.3.1)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size}")
    ranges: list[Range] = []
    start, end = 0, size
    while end - start > 1:
        k = split(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    return ranges[::-1]


def consistency_ranges(m: int, n: int) -> list[Range]:
    """PROOF(m, D[n]) as leaf ranges (RFC 9162 §2.1.4.1); empty when m is 0 or m == n."""
    if not 0 <= m <= n:
        raise ValueError(f"no consistency proof from {m} to {n}")
    if m in (0, n):
        return []
    ranges: list[Range] = []
    start, end, complete = 0, n, True
    while True:
        if m == end - start:
            if not complete:
                ranges.append((start, end))
            break
        k = split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            m -= k
            start += k
            complete = False
    return ranges[::-1]


def nodes_of(start: int, end: int) -> list[Node]:
    """The complete nodes whose hashes make up MTH(D[start:end]), left to right."""
    size = end - start
    if size <= 0:
        raise ValueError(f"empty range [{start}, {end})")
    if size & (size - 1) == 0:
        level = size.bit_length() - 1
        if start % size:
            raise ValueError(f"[{start}, {end}) is not an aligned subtree")
        return [(level, start >> level)]
    k = split(size)
    return nodes_of(start, start + k) + nodes_of(start + k, end)


def range_hash(start: int, end: int, node: Callable[[int, int], bytes]) -> bytes:
    """MTH(D[start:end]) from complete-node hashes (``node(level, index)``)."""
    size = end - start
    if size & (size - 1) == 0:
        level = size.bit_length() - 1
        return node(level, start >> level)
    k = split(size)
    return node_hash(range_hash(start, start + k, node), range_hash(start + k, end, node))


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2: does ``proof`` show leaf ``index`` with hash ``leaf`` in the tree ``root``?"""
    if index >= size or index < 0:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(m: int, n: int, root_m: bytes, root_n: bytes, proof: Sequence[bytes]) -> bool:
    """RFC 9162 §2.1.4.2: does ``proof`` show the tree of ``m`` leaves is a prefix of the one of ``n``?"""
    if not 0 <= m <= n:
        return False
    if m == n:
        return not proof and root_m == root_n
    if m == 0:
        return not proof and root_m == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if m & (m - 1) == 0:
        path.insert(0, root_m)
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == root_m and sr == root_n and sn == 0


def leaves_needed(nodes: Iterable[Node], stored_from: int) -> set[int]:
    """The leaf indices needed to compute the nodes below level ``stored_from`` (the store keeps the rest)."""
    leaves: set[int] = set()
    for level, index in nodes:
        if level < stored_from:
            leaves.update(range(index << level, (index + 1) << level))
    return leaves


def node_from_leaves(level: int, index: int, leaf: Callable[[int], bytes]) -> bytes:
    """A complete node's hash from its leaves (for the low levels the store does not keep)."""
    if level == 0:
        return leaf(index)
    return node_hash(node_from_leaves(level - 1, 2 * index, leaf), node_from_leaves(level - 1, 2 * index + 1, leaf))
