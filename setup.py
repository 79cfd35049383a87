"""Which packages the wheel holds: found under each source folder, never listed by hand, so a
new subpackage cannot be left out of an install (pyproject.toml holds everything else).

The source tree keeps ``kernels/`` and ``notebooks/`` beside ``pdlab/``; ``package-dir`` in
pyproject.toml maps them to ``pdlab.kernels`` and ``pdlab.notebooks``. setuptools' own
``packages.find`` cannot follow such a mapping, which is why this file exists.
"""

from setuptools import find_namespace_packages, setup

# Folders that are never packages: caches and Jupyter's autosaves.
_SKIP = ["*__pycache__*", "*.ipynb_checkpoints*", ".*"]


def _found(prefix: str, folder: str) -> list[str]:
    subpackages = find_namespace_packages(folder, exclude=_SKIP)
    return [prefix, *(f"{prefix}.{name}" for name in subpackages)]


setup(
    packages=[
        *_found("pdlab", "pdlab"),
        *_found("pdlab.kernels", "kernels"),
        *_found("pdlab.notebooks", "notebooks"),
    ]
)
