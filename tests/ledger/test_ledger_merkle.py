"""The Merkle tree and both proofs (RFC 9162), pure: the reference vectors, then properties.

The vectors are the RFC 6962 / certificate-transparency test data (leaves, roots of every size
1..8, and some proofs), published facts that any conforming implementation reproduces.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.ledger import merkle

LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    bytes(range(0x50, 0x58)),
    bytes(range(0x60, 0x70)),
]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
CONSISTENCY = {
    (1, 1): [],
    (1, 8): INCLUSION[(0, 8)],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}
VECTOR_LEAVES = [merkle.leaf_hash(d) for d in LEAVES]


def _node_from(leaves: list[bytes]):  # type: ignore[no-untyped-def]
    return lambda level, index: merkle.node_from_leaves(level, index, leaves.__getitem__)


def _proof(ranges: list[merkle.Range], leaves: list[bytes]) -> list[bytes]:
    return [merkle.range_hash(s, e, _node_from(leaves)) for s, e in ranges]


@pytest.mark.parametrize("size", range(9))
def test_roots_match_the_reference_vectors(size: int) -> None:
    frontier = merkle.Frontier()
    for leaf in VECTOR_LEAVES[:size]:
        frontier.append(leaf)
    assert frontier.root().hex() == merkle.root_of(VECTOR_LEAVES[:size]).hex() == ROOTS[size]


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION))
def test_inclusion_proofs_match_the_reference_vectors(index: int, size: int) -> None:
    proof = _proof(merkle.inclusion_ranges(index, size), VECTOR_LEAVES)
    assert [p.hex() for p in proof] == INCLUSION[(index, size)]
    assert merkle.verify_inclusion(index, size, VECTOR_LEAVES[index], proof, bytes.fromhex(ROOTS[size]))


@pytest.mark.parametrize(("m", "n"), sorted(CONSISTENCY))
def test_consistency_proofs_match_the_reference_vectors(m: int, n: int) -> None:
    proof = _proof(merkle.consistency_ranges(m, n), VECTOR_LEAVES)
    assert [p.hex() for p in proof] == CONSISTENCY[(m, n)]
    assert merkle.verify_consistency(m, n, bytes.fromhex(ROOTS[m]), bytes.fromhex(ROOTS[n]), proof)


leaf_lists = st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=140, unique=True)
SETTINGS = settings(max_examples=200, deadline=None)


@SETTINGS
@given(leaves=leaf_lists)
def test_the_frontier_and_its_completed_nodes_agree_with_the_recursive_definition(leaves: list[bytes]) -> None:
    frontier = merkle.Frontier()
    completed: dict[merkle.Node, bytes] = {}
    for leaf in leaves:
        frontier.append(leaf, lambda level, index, h: completed.__setitem__((level, index), h))
        assert frontier.root() == merkle.root_of(leaves[: frontier.size])
    for (level, index), digest in completed.items():
        assert digest == merkle.root_of(leaves[index << level : (index + 1) << level])
    assert merkle.Frontier.unpack(frontier.size, frontier.pack()) == frontier
    assert [completed[n] for n in merkle.frontier_nodes(len(leaves))] == frontier.hashes


@SETTINGS
@given(leaves=leaf_lists, data=st.data())
def test_an_inclusion_proof_verifies_and_fails_when_anything_is_changed(
    leaves: list[bytes], data: st.DataObject
) -> None:
    size = data.draw(st.integers(1, len(leaves)), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    root = merkle.root_of(leaves[:size])
    proof = _proof(merkle.inclusion_ranges(index, size), leaves)
    assert merkle.verify_inclusion(index, size, leaves[index], proof, root)
    assert not merkle.verify_inclusion(index, size, merkle.leaf_hash(leaves[index]), proof, root)  # tampered leaf
    assert not merkle.verify_inclusion(index, size, leaves[index], proof, merkle.leaf_hash(root))  # wrong root
    other = data.draw(st.integers(index + 1, len(leaves) + 1).filter(lambda s: s != size), label="other size")
    other_root = merkle.root_of(leaves[:other]) if other <= len(leaves) else merkle.leaf_hash(root)
    assert not merkle.verify_inclusion(index, other, leaves[index], proof, other_root)  # wrong size
    if proof:
        k = data.draw(st.integers(0, len(proof) - 1), label="tampered element")
        bad = [*proof[:k], merkle.leaf_hash(proof[k]), *proof[k + 1 :]]
        assert not merkle.verify_inclusion(index, size, leaves[index], bad, root)


@SETTINGS
@given(leaves=leaf_lists, data=st.data())
def test_a_consistency_proof_verifies_and_fails_when_anything_is_changed(
    leaves: list[bytes], data: st.DataObject
) -> None:
    n = data.draw(st.integers(1, len(leaves)), label="n")
    m = data.draw(st.integers(0, n), label="m")
    root_m, root_n = merkle.root_of(leaves[:m]), merkle.root_of(leaves[:n])
    proof = _proof(merkle.consistency_ranges(m, n), leaves)
    assert merkle.verify_consistency(m, n, root_m, root_n, proof)
    forged = merkle.leaf_hash(b"forged")
    assert not merkle.verify_consistency(m, n, forged, root_n, proof)  # the old tree was rewritten
    if 0 < m < n:  # (every tree extends the empty one)
        assert not merkle.verify_consistency(m, n, root_m, forged, proof)  # the new tree forked
    if proof:
        k = data.draw(st.integers(0, len(proof) - 1), label="tampered element")
        bad = [*proof[:k], merkle.leaf_hash(proof[k]), *proof[k + 1 :]]
        assert not merkle.verify_consistency(m, n, root_m, root_n, bad)
    if 0 < m < n:
        other = data.draw(st.integers(1, n).filter(lambda s: s != m), label="other m")
        assert not merkle.verify_consistency(other, n, merkle.root_of(leaves[:other]), root_n, proof)  # wrong size
        assert not merkle.verify_consistency(m, n + 1, root_m, merkle.root_of([*leaves[:n], forged]), proof)


def test_every_proof_of_every_small_tree_verifies() -> None:
    """Exhaustively, for every tree up to 40 leaves: each (index, size) and each (m, n)."""
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(40)]
    roots = [merkle.root_of(leaves[:n]) for n in range(41)]
    for n in range(1, 41):
        for i in range(n):
            proof = _proof(merkle.inclusion_ranges(i, n), leaves)
            assert merkle.verify_inclusion(i, n, leaves[i], proof, roots[n]), (i, n)
        for m in range(n + 1):
            proof = _proof(merkle.consistency_ranges(m, n), leaves)
            assert merkle.verify_consistency(m, n, roots[m], roots[n], proof), (m, n)


@settings(max_examples=200, deadline=None)
@given(before=st.integers(0, 70), added=st.integers(0, 70), stored_from=st.integers(0, 5))
def test_extend_is_append_leaf_by_leaf_keeping_the_nodes_from_a_level(
    before: int, added: int, stored_from: int
) -> None:
    """The append path's batch call grows the frontier and reports completed nodes as ``append`` does."""
    leaves = [merkle.leaf_hash(str(i).encode()) for i in range(before + added)]
    one_by_one, batched = merkle.Frontier(), merkle.Frontier()
    for leaf in leaves[:before]:
        one_by_one.append(leaf)
        batched.append(leaf)
    heard: list[tuple[int, int, bytes]] = []
    for leaf in leaves[before:]:
        one_by_one.append(leaf, lambda level, index, h: heard.append((level, index, h)))
    kept = batched.extend(leaves[before:], stored_from)
    assert (batched.size, batched.hashes) == (one_by_one.size, one_by_one.hashes)
    assert kept == [n for n in heard if n[0] >= stored_from]
    assert batched.root() == merkle.root_of(leaves)
