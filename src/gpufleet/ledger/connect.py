"""From what a user types after ``--ledger`` to an engine, without ever creating what only a writer may.

Two ways in:

- ``writable``: the recorder, the twin and ``audit upgrade``. A missing SQLite file is created and
  the schema brought to Alembic's head; a database that already holds tables but is not a gpufleet
  ledger is refused, so gpufleet never adds its tables to someone else's database.
- ``readable``: every reading command (``audit verify|who|why|report|export|prove|checkpoint``).
  The database must exist and carry the ledger's schema marker (``ledger_alembic_version`` at this
  gpufleet's revision); SQLite is opened with ``mode=ro`` and PostgreSQL sessions are read-only, so
  a reader cannot change it even by mistake. (SQLite itself may create its ``-wal``/``-shm`` side
  files next to a WAL-mode ledger, as for any reader; the database file is not touched.)

Anything else (``mysql://``, ``http://``, a text file, a missing file) is an ``InputError`` that
names the ledger, so the CLI exits 2 without a traceback.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError

from gpufleet.errors import InputError
from gpufleet.ledger.schema import SCHEMA_REVISION

SQLITE_MAGIC = b"SQLite format 3\x00"
VERSION_TABLE = "ledger_alembic_version"
IMMEDIATE = "gpufleet_sqlite_immediate"


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed ``--ledger``: the SQLAlchemy URL, and the file when it is SQLite."""

    url: URL
    shown: str  # for messages: the user's text, password hidden
    path: Path | None

    @property
    def backend(self) -> str:
        return "sqlite" if self.path is not None else "postgresql"


def _problem(shown: str, message: str) -> InputError:
    return InputError.one(message, file=shown, path="--ledger")


def parse(ledger: str) -> Target:
    """A SQLite file path, ``sqlite:///PATH``, or ``postgresql://`` / ``postgres://``; nothing else."""
    if "://" not in ledger:
        path = Path(ledger).expanduser().resolve()
        return Target(make_url(f"sqlite:///{path}"), ledger, path)
    scheme = ledger.split("://", 1)[0].lower()
    try:
        if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            url = make_url("postgresql+psycopg://" + ledger.split("://", 1)[1])
            shown = url.set(drivername=scheme).render_as_string(hide_password=True)
            if not url.database:
                raise _problem(shown, "the URL names no database (postgresql://user@host/DATABASE)")
            return Target(url, shown, None)
        if scheme == "sqlite":
            url = make_url(ledger)
            if not url.database or url.database == ":memory:":
                raise _problem(ledger, "an in-memory SQLite database cannot hold a ledger; give a file path")
            return Target(url, ledger, Path(url.database).expanduser().resolve())
    except ArgumentError as exc:
        raise _problem(ledger, f"not a database URL: {exc}") from None
    raise _problem(
        ledger,
        f"unsupported database URL scheme {scheme!r}: give a SQLite file path or a postgresql://user@host/db URL",
    )


def _check_sqlite_file(target: Target, *, must_exist: bool) -> bool:
    """True when the file exists (and is a SQLite database); refuse anything else by name."""
    assert target.path is not None
    path = target.path
    if not path.exists():
        if must_exist:
            raise _problem(target.shown, "no such ledger file (a reading command never creates one)")
        return False
    if not path.is_file():
        raise _problem(target.shown, "not a regular file, so not a ledger")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise _problem(target.shown, f"cannot read it: {exc.strerror}") from None
    if header != SQLITE_MAGIC and (header or must_exist):
        raise _problem(target.shown, "not a SQLite database, so not a gpufleet ledger")
    return True


def _configure_sqlite(engine: Engine, *, writer: bool) -> None:
    """Writers: WAL, a busy timeout, and BEGIN IMMEDIATE, so two writers queue instead of failing."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # the timeout first: switching a new file to WAL takes a lock too, and two replicas starting
        # together on one new ledger must queue there as well (found on the testbed)
        cursor.execute("PRAGMA busy_timeout=30000")
        if writer:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate and writer else "BEGIN")


def _engine(target: Target, *, writer: bool) -> Engine:
    if target.path is None:
        try:
            engine = create_engine(target.url)
        except (ArgumentError, NoSuchModuleError) as exc:
            raise _problem(target.shown, f"cannot use this URL: {exc}") from None
        if not writer:

            @event.listens_for(engine, "connect")
            def _read_only(dbapi_conn: Any, _record: Any) -> None:
                with dbapi_conn.cursor() as cursor:
                    cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                dbapi_conn.commit()

        return engine
    if writer:
        target.path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(target.url)
    else:
        uri = f"file:{pathname2url(str(target.path))}?mode=ro"
        engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False))
    _configure_sqlite(engine, writer=writer)
    return engine


def revision(engine: Engine, shown: str) -> str | None:
    """The ledger's schema revision; None for an empty database; refuse a foreign one by name."""
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if not tables:
                return None
            if VERSION_TABLE not in tables or "ledger_entries" not in tables:
                some = ", ".join(sorted(tables)[:5])
                raise _problem(shown, f"not a gpufleet ledger: it holds other tables ({some}) and no {VERSION_TABLE}")
            versions = [str(v) for v in conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars()]
    except DBAPIError as exc:
        raise _problem(shown, f"cannot open the ledger: {str(exc.orig).strip()}") from None
    except SQLAlchemyError as exc:
        raise _problem(shown, f"cannot open the ledger: {exc}") from None
    if len(versions) != 1:
        raise _problem(shown, f"not a usable gpufleet ledger: {VERSION_TABLE} holds {len(versions)} rows")
    return versions[0]


def readable(ledger: str) -> tuple[Engine, Target]:
    """An engine that cannot write, on a database that is a gpufleet ledger at this revision."""
    target = parse(ledger)
    if target.path is not None:
        _check_sqlite_file(target, must_exist=True)
    engine = _engine(target, writer=False)
    try:
        found = revision(engine, target.shown)
        if found is None:
            raise _problem(
                target.shown, "an empty database, not a gpufleet ledger (a reading command never creates one)"
            )
        if found != SCHEMA_REVISION:
            raise _problem(
                target.shown,
                f"the ledger's schema is revision {found}; this gpufleet reads {SCHEMA_REVISION}"
                f" (run `gpufleet audit upgrade --ledger {target.shown}` to upgrade it)",
            )
    except BaseException:
        engine.dispose()
        raise
    return engine, target


def writable(ledger: str) -> tuple[Engine, Target]:
    """An engine for a writer: a new ledger, or an existing one (never a foreign database)."""
    target = parse(ledger)
    if target.path is not None and _check_sqlite_file(target, must_exist=False):
        # look before the writer's first connection switches the file to WAL mode
        reader = _engine(target, writer=False)
        try:
            revision(reader, target.shown)
        finally:
            reader.dispose()
    engine = _engine(target, writer=True)
    try:
        revision(engine, target.shown)
    except BaseException:
        engine.dispose()
        raise
    return engine, target
