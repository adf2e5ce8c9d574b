"""Fixtures shared by every test folder: the throwaway PostgreSQL server (see tests/pg.py)."""

from tests.pg import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]
