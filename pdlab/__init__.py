"""pdlab: the prefill/decode path of an LLM inference engine, small enough to read and run.

Mirrors vLLM's v1 engine (``vllm/v1``) with the same names: a paged KV cache, a unified
token-budget scheduler, MLA (DeepSeek) attention with Triton kernels and torch twins, and
prefill/decode disaggregation. See docs/design.md for the contracts and README.md for the
map. What a learner types first is importable from here (loaded on first use).

The source tree keeps ``kernels/`` and ``notebooks/`` beside ``pdlab/``; an install maps them
to ``pdlab.kernels`` and ``pdlab/notebooks`` (pyproject.toml). When Python finds this package
in a checkout rather than in site-packages, :class:`_SourceTreeFinder` gives
``pdlab.kernels`` the same mapping.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent
_CHECKOUT_KERNELS = _HERE.parent / "kernels"


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``pdlab.kernels`` in ``<checkout>/kernels``. Last on ``sys.meta_path``: an
    install that has ``pdlab.kernels`` always wins."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "pdlab.kernels":
            return None
        # PathFinder looks for the name's last part ("kernels") in the folders it is given.
        return importlib.machinery.PathFinder.find_spec(fullname, [str(_CHECKOUT_KERNELS.parent)])


if not (_HERE / "kernels").is_dir() and (_CHECKOUT_KERNELS / "__init__.py").is_file():
    if not any(type(f).__name__ == "_SourceTreeFinder" for f in sys.meta_path):
        sys.meta_path.append(_SourceTreeFinder())


def notebooks_dir() -> Path:
    """The folder holding the shipped ``NN_*.ipynb`` notebooks: ``pdlab/notebooks`` in an
    install, ``notebooks/`` beside ``pdlab/`` in a checkout or an editable install."""
    for folder in (_HERE / "notebooks", _HERE.parent / "notebooks"):
        if any(folder.glob("[0-9][0-9]_*.ipynb")):
            return folder
    raise FileNotFoundError(
        f"no notebooks found in {_HERE / 'notebooks'} or {_HERE.parent / 'notebooks'}: "
        "reinstall pdlab (pip install --force-reinstall pdlab)"
    )


# What a learner types first, loaded on first use (PEP 562) so that importing pdlab for its
# version or its notebooks does not import torch.
_EXPORTS = {
    "LLMEngine": "pdlab.engine.llm_engine",
    "PDPair": "pdlab.disagg.pair",
    "SamplingParams": "pdlab.engine.request",
    "ModelConfig": "pdlab.engine.config",
    "CacheConfig": "pdlab.engine.config",
    "SchedulerConfig": "pdlab.engine.config",
    "ParallelConfig": "pdlab.engine.config",
    "AttentionConfig": "pdlab.engine.config",
    "KVTransferConfig": "pdlab.engine.config",
    "run_demo": "pdlab.demo",
}
__all__ = [*_EXPORTS, "__version__", "notebooks_dir"]


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'pdlab' has no attribute {name!r}")
