"""The check runs against the vLLM release it names: ``make test-upstream`` passes its
``VLLM_VERSION`` as ``PDLAB_VLLM_VERSION`` (docs/upstream.md), and the installed vLLM must
be that release, not whatever an older ``.venv-upstream`` still holds."""

import os
from importlib.metadata import version

import pytest

pytestmark = pytest.mark.upstream


def test_installed_vllm_is_the_release_asked_for():
    wanted = os.environ.get("PDLAB_VLLM_VERSION")
    if wanted is None:
        pytest.skip("PDLAB_VLLM_VERSION is unset (make test-upstream sets it)")
    assert version("vllm") == wanted, (
        f"vllm {version('vllm')} is installed; VLLM_VERSION={wanted} was asked for"
    )
