"""Constructor-argument checks shared by the layers (private helpers).

Every check raises `ValueError` naming the argument and the value received,
following `keras/src/layers/rnn/gru.py`.
"""

from __future__ import annotations

import numbers


def check_positive_int(name: str, value: object) -> int:
    """Returns `value` if it is an integer >= 1, else raises `ValueError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"Argument `{name}` must be a positive integer. Received: {name}={value!r}")
    return int(value)


def check_rate(name: str, value: object) -> float:
    """Returns `value` if it is a number in [0, 1), else raises `ValueError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"Argument `{name}` must be a float in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_bool(name: str, value: object) -> bool:
    """Returns `value` if it is a Python bool, else raises `ValueError`."""
    if not isinstance(value, bool):
        raise ValueError(f"Argument `{name}` must be a bool. Received: {name}={value!r}")
    return value


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """Returns `value` if it is one of `choices`, else raises `ValueError`."""
    if value not in choices:
        raise ValueError(f"Argument `{name}` must be one of {choices}. Received: {name}={value!r}")
    return value  # type: ignore[return-value]
