"""Helpers shared by the configs: ``replace``, and validation where a bad value raises
``ValueError`` naming the config, the field, the value and what is allowed (vLLM's configs
live in ``vllm/config/``; its ``utils.py`` holds their shared helpers).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from pdlab.errors import Phrase, check_int, invalid

C = TypeVar("C")


class ConfigBase:
    """What every frozen config dataclass has: ``replace(**changes)``, a validated copy."""

    def replace(self: C, **changes: Any) -> C:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def _fail(cls: str, name: str, value: Any, allowed: Phrase) -> None:
    raise invalid(f"{cls}.{name}", value, allowed)


def _check_int(cls: str, name: str, value: Any, minimum: int = 1) -> None:
    check_int(f"{cls}.{name}", value, minimum)


def _check_bool(cls: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(cls, name, value, Phrase("err_x_bool"))


def _check_positive_float(cls: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        _fail(cls, name, value, Phrase("err_x_num_gt", n=0))
