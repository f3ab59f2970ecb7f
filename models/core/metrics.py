"""How far projections are from measurements, in one place."""

from __future__ import annotations

from collections.abc import Sequence


def mape(errors: Sequence[float | None]) -> float | None:
    """Mean absolute percentage error of relative errors (0.05 = 5 %); None where none is known."""
    known = [abs(e) for e in errors if e is not None]
    return 100 * sum(known) / len(known) if known else None
