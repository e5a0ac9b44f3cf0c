"""The real PostgreSQL server of the ledger tests, reused (imported, not copied) for study storage."""

from tests.ledger.conftest import postgres_url

__all__ = ["postgres_url"]
