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
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from gpufleet.errors import InputError
from gpufleet.ledger import chain, schema
from gpufleet.ledger.records import Allocation, Record, WaitInterval, canonical, from_canonical

_KEY_CHUNK = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_IMMEDIATE = "gpufleet_sqlite_immediate"


@dataclass(frozen=True, slots=True)
class AppendResult:
    written: int
    skipped: int
    head_seq: int


@dataclass(frozen=True, slots=True)
class LedgerVerdict:
    """The chain verdict plus whether the current view still matches the chain's fold."""

    chain: chain.Verdict
    view_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.view_problems


def database_url(ledger: str) -> str:
    """A SQLAlchemy URL from what a user types: a URL, or a path to a SQLite file."""
    if "://" not in ledger:
        return f"sqlite:///{Path(ledger).expanduser().resolve()}"
    if ledger.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + ledger.split("://", 1)[1]
    return ledger


def _begin_and_span(record: Record) -> tuple[datetime | None, datetime | None]:
    if isinstance(record, Allocation):
        return record.quota_reserved or record.admitted or record.created, record.finished
    return record.start, record.end


def _micros(value: datetime | None) -> int | None:
    """UTC microseconds since the epoch (exact integer arithmetic, the same on every database)."""
    if value is None:
        return None
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class Ledger:
    """An open ledger. Create with ``Ledger.open(url)``; close with ``close()`` or a ``with`` block."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        current_cols = [c.name for c in schema.current.columns]
        updates = ", ".join(f"{c} = excluded.{c}" for c in current_cols if c != "record_key")
        entry_cols = [c.name for c in schema.entries.columns]
        self._sql = {
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
        }

    @classmethod
    def open(cls, ledger: str, *, migrate: bool = True) -> Ledger:
        url = database_url(ledger)
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise InputError.one(f"not a database URL or file path: {exc}", path="--ledger") from None
        if parsed.get_backend_name() == "sqlite" and parsed.database:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed)
        if engine.dialect.name == "sqlite":
            _configure_sqlite(engine)
        ledger_obj = cls(engine)
        if migrate:
            try:
                ledger_obj.migrate()
            except OperationalError as exc:
                engine.dispose()
                raise InputError.one(f"cannot open the ledger: {exc.orig}", path="--ledger") from None
        return ledger_obj

    def migrate(self) -> None:
        """Bring the schema to Alembic's head (idempotent)."""
        from alembic import command  # a second of imports, needed only here
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(resources.files("gpufleet.ledger") / "migrations"))
        with self.engine.begin() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _writer(self) -> Connection:
        return self.engine.connect().execution_options(**{_IMMEDIATE: True})

    def append(
        self, records: Sequence[Record], *, positions: Mapping[str, str] | None = None
    ) -> AppendResult:
        """Chain every record not already present, and store ``positions``, in one transaction."""
        prepared: dict[tuple[str, str], tuple[Record, str]] = {}
        for record in records:
            _check_storable(record)
            text = canonical(record)
            try:
                text.encode()
            except UnicodeEncodeError:
                raise InputError.one(
                    f"{record.kind} {record.key!r}: text that is not valid Unicode"
                ) from None
            prepared.setdefault((record.key, chain.record_hash(text)), (record, text))
        with self._writer() as conn, conn.begin():
            row = conn.execute(select(schema.head).where(schema.head.c.id == 1).with_for_update()).first()
            seq, prev_record, prev_chain = (
                (row.seq, row.record_hash, row.chain_hash) if row else (0, chain.GENESIS, chain.GENESIS)
            )
            present = _present(conn, list({key for key, _ in prepared}))
            entry_rows: list[tuple[Any, ...]] = []
            current_rows: dict[str, tuple[Any, ...]] = {}
            for (key, rh), (record, text) in prepared.items():
                if (key, rh) in present:
                    continue
                seq += 1
                chained = chain.chain_hash(prev_chain, rh)
                entry_rows.append((seq, record.kind, key, text, rh, prev_record, chained))
                begin, end = _begin_and_span(record)
                current_rows[key] = (
                    key,
                    record.kind,
                    seq,
                    record.workload_uid,
                    record.namespace,
                    record.name,
                    record.team,
                    _micros(begin),
                    _micros(end),
                    record.simulated,
                )
                prev_record, prev_chain = rh, chained
            if entry_rows:
                # Plain DBAPI executemany: the same SQL on both databases, without SQLAlchemy's
                # per-value processing, which would otherwise cost as much as hashing.
                self._insert(conn, "entries", entry_rows)
                self._insert(conn, "current", list(current_rows.values()))
                head_row = {"id": 1, "seq": seq, "record_hash": prev_record, "chain_hash": prev_chain}
                self._upsert(conn, schema.head, ["id"], [head_row])
            if positions:
                rows = [{"source": s, "position": p} for s, p in sorted(positions.items())]
                self._upsert(conn, schema.positions, ["source"], rows)
        return AppendResult(len(entry_rows), len(records) - len(entry_rows), seq)

    def _insert(self, conn: Connection, table: str, rows: list[tuple[Any, ...]]) -> None:
        """SQLite: executemany. PostgreSQL: COPY (the current view through a temporary table,
        because COPY cannot resolve conflicts); per-parameter binding would cost more than hashing."""
        head, values, tail = self._sql[table]
        if self.engine.dialect.name != "postgresql":
            conn.exec_driver_sql(f"{head} VALUES {values}{tail}", rows)
            return
        target = "ledger_entries" if table == "entries" else "ledger_current_load"
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

    def _upsert(self, conn: Connection, table: Any, keys: list[str], rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        stmt = dialect.insert(table)
        updates = {c.name: stmt.excluded[c.name] for c in table.columns if c.name not in keys}
        conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=updates), rows)

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
            start, end = _micros(overlapping[0]), _micros(overlapping[1])
            query = query.where(cur.c.begin_us < end).where(cur.c.end_us.is_(None) | (cur.c.end_us > start))
        with self.engine.connect() as conn:
            return [from_canonical(r.body) for r in conn.execute(query.order_by(cur.c.record_key))]

    def allocations(self, **filters: Any) -> list[Allocation]:
        return [r for r in self.current_records(kind="Allocation", **filters) if isinstance(r, Allocation)]

    def waits(self, **filters: Any) -> list[WaitInterval]:
        return [
            r for r in self.current_records(kind="WaitInterval", **filters) if isinstance(r, WaitInterval)
        ]

    def entries(self, batch: int = 20_000) -> Iterator[chain.Entry]:
        """Every chained entry in sequence order, streamed."""
        e = schema.entries
        query = select(e.c.seq, e.c.record_key, e.c.body, e.c.record_hash, e.c.prev_hash, e.c.chain_hash)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch).execute(query.order_by(e.c.seq))
            for row in result:
                yield chain.Entry(*row)

    def _seq_of_record_hash(self, rec_hash: str) -> int | None:
        e = schema.entries
        with self.engine.connect() as conn:
            row = conn.execute(select(e.c.seq).where(e.c.record_hash == rec_hash).limit(1)).first()
        return None if row is None else int(row.seq)

    def verify(self, expected_head: str | None = None) -> LedgerVerdict:
        """Check the chain, the current view's fold and, if given, the published head hash."""
        newest: dict[str, int] = {}

        def tracked() -> Iterator[chain.Entry]:
            for entry in self.entries():
                newest[entry.record_key] = entry.seq
                yield entry

        verdict = chain.verify(tracked(), self._seq_of_record_hash)
        problems: list[str] = []
        if verdict.ok:
            if expected_head is not None and verdict.head != expected_head:
                problems.append(
                    f"the chain head is {verdict.head}, not the published {expected_head}:"
                    " entries were appended after it was published, or removed from the end"
                )
            with self.engine.connect() as conn:
                stored = {r.record_key: r.seq for r in conn.execute(select(schema.current))}
            if stored != newest:
                bad = sorted(k for k in stored.keys() | newest.keys() if stored.get(k) != newest.get(k))
                problems.append(
                    f"the current view disagrees with the chain for {len(bad)} key(s), first {bad[0]!r}"
                )
        return LedgerVerdict(verdict, problems)


def _check_storable(record: Record) -> None:
    """PostgreSQL text cannot hold NUL; refuse it on every backend so both store the same records."""
    for value in (record.workload_uid, record.namespace, record.name, record.team):
        if value is not None and "\x00" in value:
            raise InputError.one(f"{record.kind} {record.key!r}: a NUL character cannot be stored")


def _present(conn: Connection, keys: list[str]) -> set[tuple[str, str]]:
    e = schema.entries
    found: set[tuple[str, str]] = set()
    for i in range(0, len(keys), _KEY_CHUNK):
        chunk = keys[i : i + _KEY_CHUNK]
        rows = conn.execute(select(e.c.record_key, e.c.record_hash).where(e.c.record_key.in_(chunk)))
        found.update((r.record_key, r.record_hash) for r in rows)
    return found


def _configure_sqlite(engine: Engine) -> None:
    """WAL, a busy timeout, and BEGIN IMMEDIATE for writers, so two writers queue instead of failing."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
