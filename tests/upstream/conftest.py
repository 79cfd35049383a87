"""tests/upstream: pdlab beside vLLM's own code (``make test-upstream``, docs/upstream.md).

These tests import vLLM, which lives in ``.venv-upstream`` only. They are collected when
the run selects them (``-m upstream``, as ``make test-upstream`` does, or a path inside
this folder); any other run (``make test``) leaves the folder out. A selected run without
vLLM stops with one line saying how to get it: a reference check that skips itself would
check nothing.
"""

import importlib.util
import os
from importlib.metadata import version
from pathlib import Path

import pytest

HERE = Path(__file__).parent
# Before vLLM is first imported: its CPU platform (there is no GPU here), and quiet logs
# (the KV load failures the workloads plant are logged as errors).
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "CRITICAL")


def selected(config: pytest.Config) -> bool:
    if "upstream" in (config.getoption("markexpr") or ""):
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path != HERE and HERE in collection_path.parents and not selected(config):
        return True
    return None


def pytest_configure(config: pytest.Config) -> None:
    if selected(config) and importlib.util.find_spec("vllm") is None:
        raise pytest.UsageError(
            "tests/upstream needs vLLM, which this Python lacks: run make test-upstream "
            "(it installs vLLM into .venv-upstream)"
        )


def pytest_report_header(config: pytest.Config) -> str | None:
    if selected(config):
        return f"tests/upstream: vLLM {version('vllm')} beside pdlab"
    return None
