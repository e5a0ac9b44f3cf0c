"""The two database backends every storage test runs on (PostgreSQL tests share one xdist worker)."""

import pytest

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.xdist_group("postgres")),
]
