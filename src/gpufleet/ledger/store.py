"""The ledger's storage: one ``Ledger`` over a SQLite file or a PostgreSQL database.

Everything that writes (the recorder, the twin) goes through ``Ledger.append``; everything that
reads goes through ``current_records`` and ``entries``. How the append-only history and the
"current" answers fit together:

- A record's key (``uid/attempt`` for an allocation, ``uid/wait/n`` for a wait interval) names
  the thing; each distinct content of that thing is one chained entry. When an allocation
  finishes, the recorder appends the finished version as a new entry; the admitted version stays
  in the chain untouched. The current view points each key at its newest entry.
- ``append`` skips a record whose exact (key, content) is already in the chain, so a replayed
  event, a relist after a restart, or a twin run written twice adds nothing.
- The chain head lives in one locked row; sequence numbers are gap-free and the order of the
  chain is the order of commits.
- The same transaction grows the Merkle tree (``merkle``): each new entry's leaf goes onto the
  frontier kept in the head row, and the complete subtrees from ``schema.TREE_STORED_FROM`` up go
  into ``ledger_tree``, so a checkpoint or a proof never rehashes the ledger.
- Opening goes through ``connect``: writers may create, readers (``Ledger.read``) never do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import DatabaseError, OperationalError

from gpufleet.errors import InputError
from gpufleet.ledger import chain, connect, derived, merkle, schema, verification
from gpufleet.ledger.canonical import canonical_bytes
from gpufleet.ledger.records import Allocation, Record, WaitInterval, from_canonical
from gpufleet.ledger.verification import LedgerVerdict

_KEY_CHUNK = 500


@dataclass(frozen=True, slots=True)
class AppendResult:
    written: int
    skipped: int
    head_seq: int


class Ledger:
    """An open ledger. Create with ``Ledger.open(url)``; close with ``close()`` or a ``with`` block."""

    def __init__(self, engine: Engine, *, read_only: bool = False) -> None:
        self.engine = engine
        self.read_only = read_only
        mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._mark = mark
        self._postgres = engine.dialect.name == "postgresql"
        head_cols = "seq, record_hash, chain_hash, tree_frontier"
        self._head_sql = f"SELECT {head_cols} FROM ledger_head WHERE id = 1" + (" FOR UPDATE" if self._postgres else "")
        self._set_head_sql = (
            f"INSERT INTO ledger_head (id, {head_cols}) VALUES (1, {mark}, {mark}, {mark}, {mark})"
            " ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, record_hash = excluded.record_hash,"
            " chain_hash = excluded.chain_hash, tree_frontier = excluded.tree_frontier"
        )
        self._positions_sql = (
            f"INSERT INTO ledger_positions (source, position) VALUES ({mark}, {mark})"
            " ON CONFLICT (source) DO UPDATE SET position = excluded.position"
        )
        current_cols = [c.name for c in schema.current.columns]
        updates = ", ".join(f"{c} = excluded.{c}" for c in current_cols if c != "record_key")
        entry_cols = [c.name for c in schema.entries.columns]
        tree_cols = [c.name for c in schema.tree.columns]
        self._sql = {
            "tree": (
                f"INSERT INTO ledger_tree ({', '.join(tree_cols)})",
                f"({', '.join([mark] * len(tree_cols))})",
                "",
            ),
            "entries": (
                f"INSERT INTO ledger_entries ({', '.join(entry_cols)})",
                f"({', '.join([mark] * len(entry_cols))})",
                "",
            ),
            "current": (
                f"INSERT INTO ledger_current ({', '.join(current_cols)})",
                f"({', '.join([mark] * len(current_cols))})",
                f" ON CONFLICT (record_key) DO UPDATE SET {updates}",
            ),
            "new_current": (  # keys with no row yet: a plain insert (COPY on PostgreSQL)
                f"INSERT INTO ledger_current ({', '.join(current_cols)})",
                f"({', '.join([mark] * len(current_cols))})",
                "",
            ),
        }

    @classmethod
    def open(cls, ledger: str, *, migrate: bool = True) -> Ledger:
        """A writer's ledger (created and migrated as needed), or with ``migrate=False`` a reader's:
        an existing gpufleet ledger at this revision, opened so that nothing can be written."""
        if not migrate:
            return cls.read(ledger)
        engine, target = connect.writable(ledger)
        ledger_obj = cls(engine)
        try:
            ledger_obj.migrate()
        except (OperationalError, DatabaseError) as exc:
            engine.dispose()
            raise InputError.one(
                f"cannot open the ledger: {str(exc.orig).strip()}", file=target.shown, path="--ledger"
            ) from None
        return ledger_obj

    @classmethod
    def read(cls, ledger: str) -> Ledger:
        """An existing ledger, read-only: what every reading command uses."""
        engine, _ = connect.readable(ledger)
        return cls(engine, read_only=True)

    def migrate(self) -> None:
        """Bring the schema to Alembic's head (idempotent)."""
        from alembic import command  # a second of imports, needed only here
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(resources.files("gpufleet.ledger") / "migrations"))
        # BEGIN IMMEDIATE on SQLite: a deferred transaction that turns into a write fails at once when
        # another process migrates the same new file (two recorder replicas starting together), instead
        # of waiting its turn; the second then finds the schema at head and changes nothing
        writer = self.engine.connect().execution_options(**{connect.IMMEDIATE: True})
        with writer as conn, conn.begin():
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _writer(self) -> Connection:
        if self.read_only:
            raise InputError.one("this ledger was opened read-only", path="--ledger")
        return self.engine.connect().execution_options(**{connect.IMMEDIATE: True})

    def append(self, records: Sequence[Record], *, positions: Mapping[str, str] | None = None) -> AppendResult:
        """Chain every record not already present, grow the Merkle tree over them, and store
        ``positions``, all in one transaction.

        The hot path of every writer, so it speaks the driver's SQL (prepared once in ``__init__``)
        instead of building SQLAlchemy statements per batch: that and the canonical form were most
        of an append's time in Python (profiled)."""
        sha256 = hashlib.sha256
        prepared: dict[tuple[str, str], tuple[Record, bytes]] = {}
        for record in records:
            _check_storable(record)
            try:
                data = canonical_bytes(record)
            except UnicodeEncodeError:
                raise InputError.one(f"{record.kind} {record.key!r}: text that is not valid Unicode") from None
            prepared.setdefault((record.key, sha256(data).hexdigest()), (record, data))
        with self._writer() as conn, conn.begin():
            if self._postgres:
                # Every statement here is a key lookup; without fresh statistics (a ledger that grew
                # faster than autovacuum analyses it) the planner scans the whole entries table for
                # the 500-key presence check instead, and appends slow down as the ledger grows.
                conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            row = conn.exec_driver_sql(self._head_sql).first()
            seq, prev_record, prev_chain = (row[0], row[1], row[2]) if row else (0, chain.GENESIS, chain.GENESIS)
            frontier = _frontier(seq, row[3] if row else None)
            present = self._present(conn, list({key for key, _ in prepared}))
            entry_rows: list[tuple[Any, ...]] = []
            current_rows: dict[str, tuple[Any, ...]] = {}
            leaves: list[bytes] = []
            for (key, rh), (record, data) in prepared.items():
                if (key, rh) in present:
                    continue
                seq += 1
                chained = chain.chain_hash(prev_chain, rh)
                entry_rows.append((seq, record.kind, key, data.decode(), rh, prev_record, chained))
                leaves.append(merkle.leaf_hash(data))
                current_rows[key] = derived.row(record, seq)
                prev_record, prev_chain = rh, chained
            if entry_rows:
                tree_rows = frontier.extend(leaves, schema.TREE_STORED_FROM)
                # Plain DBAPI executemany: the same SQL on both databases, without SQLAlchemy's
                # per-value processing, which would otherwise cost as much as hashing.
                self._insert(conn, "entries", entry_rows)
                # A key none of whose versions is chained yet has no current row: those are inserted
                # plainly, the rest upserted. (Writers hold the head lock, so this cannot race.)
                known = {key for key, _ in present}
                fresh = [r for k, r in current_rows.items() if k not in known]
                updated = [r for k, r in current_rows.items() if k in known]
                if fresh:
                    self._insert(conn, "new_current", fresh)
                if updated:
                    self._insert(conn, "current", updated)
                if tree_rows:
                    self._insert(conn, "tree", tree_rows)
                conn.exec_driver_sql(self._set_head_sql, (seq, prev_record, prev_chain, frontier.pack() or None))
            if positions:
                conn.exec_driver_sql(self._positions_sql, sorted(positions.items()))
        return AppendResult(len(entry_rows), len(records) - len(entry_rows), seq)

    def _present(self, conn: Connection, keys: list[str]) -> set[tuple[str, str]]:
        """The (key, record hash) pairs of these keys already chained."""
        found: set[tuple[str, str]] = set()
        for i in range(0, len(keys), _KEY_CHUNK):
            chunk = keys[i : i + _KEY_CHUNK]
            marks = ", ".join([self._mark] * len(chunk))
            sql = f"SELECT record_key, record_hash FROM ledger_entries WHERE record_key IN ({marks})"
            found.update((k, h) for k, h in conn.exec_driver_sql(sql, tuple(chunk)))
        return found

    def _insert(self, conn: Connection, table: str, rows: list[tuple[Any, ...]]) -> None:
        """SQLite: executemany. PostgreSQL: COPY (the current view through a temporary table,
        because COPY cannot resolve conflicts); per-parameter binding would cost more than hashing."""
        head, values, tail = self._sql[table]
        if not self._postgres:
            conn.exec_driver_sql(f"{head} VALUES {values}{tail}", rows)
            return
        target = {"entries": "ledger_entries", "tree": "ledger_tree", "new_current": "ledger_current"}.get(
            table, "ledger_current_load"
        )
        columns = head[head.index("(") :]
        with conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            if table == "current":
                cursor.execute(
                    "CREATE TEMPORARY TABLE IF NOT EXISTS ledger_current_load"
                    " (LIKE ledger_current) ON COMMIT DELETE ROWS"
                )
            with cursor.copy(f"COPY {target} {columns} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            if table == "current":
                cursor.execute(f"{head} SELECT * FROM ledger_current_load{tail}")

    def positions(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            return {r.source: r.position for r in conn.execute(select(schema.positions))}

    def current_records(
        self,
        *,
        kind: str | None = None,
        workload_uid: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        overlapping: tuple[datetime, datetime] | None = None,
    ) -> list[Record]:
        """Newest version of every record matching the filters, ordered by key (a stable order)."""
        cur, ent = schema.current, schema.entries
        query = select(ent.c.body).join(cur, cur.c.seq == ent.c.seq)
        if kind is not None:
            query = query.where(cur.c.kind == kind)
        if workload_uid is not None:
            query = query.where(cur.c.workload_uid == workload_uid)
        if namespace is not None:
            query = query.where(cur.c.namespace == namespace)
        if name is not None:
            query = query.where(cur.c.name == name)
        if overlapping is not None:
            start, end = derived.micros(overlapping[0]), derived.micros(overlapping[1])
            query = query.where(cur.c.begin_us < end).where(cur.c.end_us.is_(None) | (cur.c.end_us > start))
        with self.engine.connect() as conn:
            return [from_canonical(r.body) for r in conn.execute(query.order_by(cur.c.record_key))]

    def current_of_workloads(self, uids: Collection[str]) -> dict[str, list[Record]]:
        """The newest version of every record of each of these workloads, by workload UID (a UID
        with none is absent). One query per 500 UIDs: the recorder asks this for a whole listing or
        batch, where a query per workload cost more than everything else it does (profiled)."""
        found: dict[str, list[Record]] = {}
        wanted = sorted(set(uids))
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), _KEY_CHUNK):
                chunk = wanted[i : i + _KEY_CHUNK]
                marks = ", ".join([self._mark] * len(chunk))
                sql = (
                    "SELECT c.workload_uid, e.body FROM ledger_current c JOIN ledger_entries e ON e.seq = c.seq"
                    f" WHERE c.workload_uid IN ({marks}) ORDER BY c.record_key"
                )
                for uid, body in conn.exec_driver_sql(sql, tuple(chunk)):
                    found.setdefault(uid, []).append(from_canonical(body))
        return found

    def allocations(self, **filters: Any) -> list[Allocation]:
        return [r for r in self.current_records(kind="Allocation", **filters) if isinstance(r, Allocation)]

    def waits(self, **filters: Any) -> list[WaitInterval]:
        return [r for r in self.current_records(kind="WaitInterval", **filters) if isinstance(r, WaitInterval)]

    def entries(self, batch: int = 20_000) -> Iterator[chain.Entry]:
        """Every chained entry in sequence order, streamed."""
        e = schema.entries
        query = select(e.c.seq, e.c.record_key, e.c.body, e.c.record_hash, e.c.prev_hash, e.c.chain_hash)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch).execute(query.order_by(e.c.seq))
            for row in result:
                yield chain.Entry(*row)

    def seq_of_record_hash(self, rec_hash: str) -> int | None:
        e = schema.entries
        with self.engine.connect() as conn:
            row = conn.execute(select(e.c.seq).where(e.c.record_hash == rec_hash).limit(1)).first()
        return None if row is None else int(row.seq)

    def verify(self, expected_head: str | None = None, sizes: frozenset[int] = frozenset()) -> LedgerVerdict:
        """Check the chain and rebuild every derived table from it (see ``verification``)."""
        return verification.verify(self, expected_head, sizes)

    def tree_head(self) -> tuple[int, bytes]:
        """(size, root) from the stored frontier: what a checkpoint signs, in log n hashes."""
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.head).where(schema.head.c.id == 1)).first()
        if row is None:
            return 0, merkle.EMPTY_ROOT
        return int(row.seq), _frontier(int(row.seq), row.tree_frontier).root()

    def leaf_data(self, indices: set[int]) -> dict[int, bytes]:
        """The bodies of the entries at these leaf indices (leaf i is entry seq i + 1), as bytes."""
        e = schema.entries
        found: dict[int, bytes] = {}
        wanted = sorted(indices)
        with self.engine.connect() as conn:
            for i in range(0, len(wanted), _KEY_CHUNK):
                seqs = [n + 1 for n in wanted[i : i + _KEY_CHUNK]]
                for row in conn.execute(select(e.c.seq, e.c.body).where(e.c.seq.in_(seqs))):
                    found[int(row.seq) - 1] = row.body.encode()
        return found

    def stored_nodes(self, nodes: set[merkle.Node]) -> dict[merkle.Node, bytes]:
        """Stored complete subtrees (levels from ``schema.TREE_STORED_FROM``) by (level, index)."""
        t = schema.tree
        found: dict[merkle.Node, bytes] = {}
        by_level: dict[int, list[int]] = {}
        for level, index in nodes:
            by_level.setdefault(level, []).append(index)
        with self.engine.connect() as conn:
            for level, indices in sorted(by_level.items()):
                for i in range(0, len(indices), _KEY_CHUNK):
                    query = select(t.c.idx, t.c.hash).where(
                        t.c.level == level, t.c.idx.in_(indices[i : i + _KEY_CHUNK])
                    )
                    found.update(((level, int(r.idx)), bytes(r.hash)) for r in conn.execute(query))
        return found

    def record_keys(self, seqs: Sequence[int]) -> dict[int, str]:
        e = schema.entries
        found: dict[int, str] = {}
        with self.engine.connect() as conn:
            for i in range(0, len(seqs), _KEY_CHUNK):
                query = select(e.c.seq, e.c.record_key).where(e.c.seq.in_(list(seqs[i : i + _KEY_CHUNK])))
                found.update((int(r.seq), r.record_key) for r in conn.execute(query))
        return found

    def entry_seqs(self, keys: Sequence[str]) -> dict[str, list[int]]:
        """Every entry (seq) of each record key, oldest first: what ``audit prove`` proves."""
        e = schema.entries
        found: dict[str, list[int]] = {k: [] for k in keys}
        with self.engine.connect() as conn:
            for i in range(0, len(keys), _KEY_CHUNK):
                query = select(e.c.record_key, e.c.seq).where(e.c.record_key.in_(keys[i : i + _KEY_CHUNK]))
                for row in conn.execute(query.order_by(e.c.seq)):
                    found[row.record_key].append(int(row.seq))
        return found


def _frontier(size: int, packed: bytes | None) -> merkle.Frontier:
    try:
        return merkle.Frontier.unpack(size, bytes(packed or b""))
    except ValueError:
        raise InputError.one(
            f"the ledger's stored Merkle frontier does not fit its {size} entries: run `gpufleet audit verify`",
            path="--ledger",
        ) from None


def _check_storable(record: Record) -> None:
    """PostgreSQL text cannot hold NUL; refuse it on every backend so both store the same records."""
    for value in (record.workload_uid, record.namespace, record.name, record.team):
        if value is not None and "\x00" in value:
            raise InputError.one(f"{record.kind} {record.key!r}: a NUL character cannot be stored")
