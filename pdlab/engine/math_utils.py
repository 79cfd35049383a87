"""Integer helpers, as ``vllm/utils/math_utils.py`` has them: the one home of ``cdiv``."""

from __future__ import annotations


def cdiv(a: int, b: int) -> int:
    """Ceiling division: the number of blocks of ``b`` slots that ``a`` tokens need."""
    return -(-a // b)


def round_down(x: int, y: int) -> int:
    """``x`` rounded down to a multiple of ``y``."""
    return (x // y) * y
