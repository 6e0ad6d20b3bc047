r"""Test helpers for headstart's extension points.

* :mod:`headstart.testing.surrogates` -- the conformance suite every
  :class:`~headstart._engine.protocols.Surrogate` (and its
  :class:`~headstart._engine.protocols.Posterior`) must pass: shapes, gradients against finite
  differences, joint/marginal consistency, degenerate data, NaN guards and JSON state.
* :mod:`headstart.testing.faults` -- an objective that fails once across worker processes, the
  restart script of a throw-away PostgreSQL server.

The helpers raise :class:`AssertionError` with the offending numbers, so they work under pytest or
any other runner; they do not import pytest.
"""
