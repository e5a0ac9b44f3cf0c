"""``audit verify``'s one pass: the chain, then every derived table rebuilt from it and compared.

The chained entries are the evidence; everything else the queries or the proofs read is derived
from them and can be rewritten by anyone with database access, so each is recomputed here from the
entries' bodies and compared row by row:

- ``ledger_current``: the newest entry of each key, with the columns the queries filter on
  (``begin_us``/``end_us``, names, team, ``simulated``): a row whose span was edited would hide an
  allocation from ``audit who`` while the chain stays intact;
- ``ledger_tree`` and ``ledger_head``: the Merkle tree's stored subtrees, the frontier, the size
  and the chain head;
- the Merkle roots at the sizes a caller asks for (a checkpoint's), from the bodies alone.

Streaming, in one snapshot: entries and current rows are read once each, both in seq order, so
each current row is compared with the body already in hand; memory holds the newest seq per key
and the stored tree rows (one per 8 entries), never the bodies. The chain's checks run inline;
only when one fails is the chain walked again by ``chain.verify`` to name the entry and the kind
of tampering.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, select

from gpufleet.ledger import chain, derived, merkle, schema

CURRENT_COLUMNS = tuple(c.name for c in schema.current.columns)
SHOWN = 3  # how many differing keys a message names


class Chained(Protocol):
    """What verification reads of a ledger (``store.Ledger``): its database and its chain, entry
    by entry, with the sequence number of a record's hash (to name where a chain breaks)."""

    engine: Engine

    def entries(self, batch: int = 20_000) -> Iterator[chain.Entry]: ...
    def seq_of_record_hash(self, rec_hash: str) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Problem:
    """A finding about derived data or the end of the chain: a machine reason and a message."""

    reason: str  # PascalCase: CurrentViewDiffers, TreeDiffers, HeadDiffers, HeadNotPublished
    message: str


@dataclass(frozen=True, slots=True)
class LedgerVerdict:
    """The chain verdict, what else disagrees with it, and the tree recomputed from the bodies."""

    chain: chain.Verdict
    problems: list[Problem] = field(default_factory=list)
    size: int = 0
    root: bytes = merkle.EMPTY_ROOT
    roots_at: dict[int, bytes] = field(default_factory=dict)  # requested sizes that exist

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.problems

    @property
    def view_problems(self) -> list[str]:
        return [p.message for p in self.problems]


class _Pass:
    """State of one walk over the entries (in seq order) and, beside it, the current view (in seq
    order too, so each current row meets the body of its entry without a second read)."""

    def __init__(self, stored_tree: dict[tuple[int, int], bytes], sizes: set[int]) -> None:
        self.frontier = merkle.Frontier()
        self.newest: dict[str, int] = {}
        self.stored_tree = stored_tree
        self.tree_bad: list[str] = []
        self.sizes = sizes
        self.roots_at: dict[int, bytes] = {0: merkle.EMPTY_ROOT} if 0 in sizes else {}
        self.pointed: dict[str, int] = {}  # key -> seq, as the current view has it
        self.view_bad: list[str] = []
        self.view_count = 0

    def completed(self, level: int, index: int, digest: bytes) -> None:
        if level < schema.TREE_STORED_FROM:
            return
        stored = self.stored_tree.pop((level, index), None)
        if stored != digest and len(self.tree_bad) < SHOWN:
            what = "missing" if stored is None else "different"
            self.tree_bad.append(f"node (level {level}, index {index}) is {what}")

    def view_problem(self, text: str) -> None:
        self.view_count += 1
        if len(self.view_bad) < SHOWN:
            self.view_bad.append(text)

    def walk(self, rows: Iterator[Any], current: Iterator[Any]) -> chain.Verdict | None:
        """The chain's checks inline (no objects per entry); None at the first break, for
        ``chain.verify`` to name. The tree and the current view grow alongside."""
        prev_record = prev_chain = chain.GENESIS
        expected = 1
        sha256, leaf_hash, append, completed = hashlib.sha256, merkle.leaf_hash, self.frontier.append, self.completed
        newest, sizes = self.newest, self.sizes
        cur = next(current, None)
        for seq, key, body, rec_hash, prev_hash, chain_hash in rows:
            data = body.encode()
            if (
                seq != expected
                or prev_hash != prev_record
                or sha256(data).hexdigest() != rec_hash
                or sha256((prev_chain + rec_hash).encode()).hexdigest() != chain_hash
            ):
                return None
            prev_record, prev_chain, expected = rec_hash, chain_hash, seq + 1
            newest[key] = seq
            append(leaf_hash(data), completed)
            if seq in sizes:
                self.roots_at[seq] = self.frontier.root()
            while cur is not None and cur[2] <= seq:
                self._compare(cur, seq, key, body)
                cur = next(current, None)
        while cur is not None:
            self.view_problem(f"{cur[0]!r} points at entry {cur[2]}, which does not exist")
            cur = next(current, None)
        return chain.Verdict(expected - 1, prev_chain, None)

    def _compare(self, stored: Any, seq: int, key: str, body: str) -> None:
        stored_key, stored_seq = stored[0], stored[2]
        self.pointed[stored_key] = stored_seq
        if stored_seq != seq or stored_key != key:
            return  # pointing at an entry that exists but is not this key's: found by the fold below
        try:
            rebuilt = derived.row_from_body(body, seq)
        except derived.NotARecord as exc:
            self.view_problem(f"{key!r}: {exc}")
            return
        if stored == rebuilt:  # the common case, in C (SQLite's 0/1 equal the booleans)
            return
        columns = _diff(_normalised(stored), rebuilt)
        if columns:
            self.view_problem(f"{key!r}: " + ", ".join(f"{c} is {a!r}, the entry says {b!r}" for c, a, b in columns))

    def fold(self) -> None:
        """Every key points at its newest entry, and no key that is not in the chain is in the view."""
        if self.pointed == self.newest:  # the common case, compared in C
            return
        differing = {k for k in self.pointed.keys() | self.newest.keys() if self.pointed.get(k) != self.newest.get(k)}
        for key in sorted(differing):
            pointed, newest = self.pointed.get(key), self.newest.get(key)
            if newest is None:
                self.view_problem(f"{key!r} is not a key of any entry")
            elif pointed is None:
                self.view_problem(f"{key!r} (entry {newest}) is missing")
            else:
                self.view_problem(f"{key!r} points at entry {pointed}, but its newest entry is {newest}")


_ENTRIES = "SELECT seq, record_key, body, record_hash, prev_hash, chain_hash FROM ledger_entries ORDER BY seq"
_CURRENT = f"SELECT {', '.join(CURRENT_COLUMNS)} FROM ledger_current ORDER BY seq, record_key"


@contextlib.contextmanager
def _stream(conn: Connection, sql: str, name: str) -> Iterator[Any]:
    """A plain DBAPI cursor over ``sql``, server-side on PostgreSQL (the rows never all sit in
    memory); rows come as tuples without SQLAlchemy's per-row work, which costs more than hashing."""
    raw: Any = conn.connection.dbapi_connection
    postgres = conn.dialect.name == "postgresql"
    cursor = raw.cursor(name=f"gpufleet_verify_{name}") if postgres else raw.cursor()
    if postgres:
        cursor.itersize = 20_000
    try:
        cursor.execute(sql)
        yield cursor
    finally:
        cursor.close()


def verify(ledger: Chained, expected_head: str | None = None, sizes: frozenset[int] = frozenset()) -> LedgerVerdict:
    """Check the chain and every derived table, all in one snapshot; the Merkle roots at ``sizes``."""
    postgres = ledger.engine.dialect.name == "postgresql"
    # one snapshot for every table, even while a recorder appends (SQLite: one read transaction)
    isolation = {"isolation_level": "REPEATABLE READ"} if postgres else {}
    with ledger.engine.connect().execution_options(**isolation) as conn, conn.begin():
        t = schema.tree
        query = select(t.c.level, t.c.idx, t.c.hash)
        stored_tree = {(r.level, r.idx): bytes(r.hash) for r in conn.execute(query)}
        head = conn.execute(select(schema.head).where(schema.head.c.id == 1)).first()
        state = _Pass(stored_tree, set(sizes))
        with _stream(conn, _ENTRIES, "entries") as rows, _stream(conn, _CURRENT, "current") as current:
            verdict = state.walk(iter(rows), iter(current))
    if verdict is None:  # the chain breaks somewhere: walk it again, slowly, to name the entry
        return LedgerVerdict(chain.verify(ledger.entries(), ledger.seq_of_record_hash))
    problems: list[Problem] = []
    if expected_head is not None and verdict.head != expected_head:
        problems.append(
            Problem(
                "HeadNotPublished",
                f"the chain head is {verdict.head}, not the published {expected_head}:"
                " entries were appended after it was published, or removed from the end",
            )
        )
    state.fold()
    if state.view_count:
        problems.append(
            Problem(
                "CurrentViewDiffers",
                f"the current view disagrees with the chain for {state.view_count} key(s): "
                + "; ".join(state.view_bad),
            )
        )
    if state.stored_tree and len(state.tree_bad) < SHOWN:
        level, index = min(state.stored_tree)
        state.tree_bad.append(f"node (level {level}, index {index}) is stored but covers entries that do not exist")
    if state.tree_bad:
        problems.append(
            Problem("TreeDiffers", "the stored Merkle tree disagrees with the entries: " + "; ".join(state.tree_bad))
        )
    problems += _head(head, verdict, state.frontier)
    return LedgerVerdict(verdict, problems, state.frontier.size, state.frontier.root(), state.roots_at)


def _normalised(row: Any) -> tuple[Any, ...]:
    values = list(row)
    values[-1] = bool(values[-1])  # SQLite stores booleans as 0/1
    return tuple(values)


def _diff(stored: tuple[Any, ...], rebuilt: tuple[Any, ...]) -> list[tuple[str, Any, Any]]:
    return [(n, a, b) for n, a, b in zip(CURRENT_COLUMNS, stored, rebuilt, strict=True) if a != b]


def _head(row: Any, verdict: chain.Verdict, frontier: merkle.Frontier) -> list[Problem]:
    stored = (0, chain.GENESIS, b"") if row is None else (row.seq, row.chain_hash, bytes(row.tree_frontier or b""))
    rebuilt = (verdict.entries, verdict.head, frontier.pack())
    names = ("size", "chain hash", "Merkle frontier")
    wrong = [n for n, a, b in zip(names, stored, rebuilt, strict=True) if a != b]
    if not wrong:
        return []
    return [
        Problem(
            "HeadDiffers",
            f"ledger_head disagrees with the entries ({', '.join(wrong)}): it records {stored[0]} entries,"
            f" the chain holds {verdict.entries}; the end of the ledger was cut or rewritten",
        )
    ]
