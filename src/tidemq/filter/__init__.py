"""Message filtering: the SQL92 selector language (parsing and evaluation)."""

from tidemq.filter.sql92 import SqlExpression, SqlFilterError, compile_sql92

__all__ = ["SqlExpression", "SqlFilterError", "compile_sql92"]
