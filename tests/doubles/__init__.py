"""Test doubles only the tests use, imported as ``from doubles.fake_connector import ...``
(``tests/`` has no ``__init__.py``, so pytest's default ``prepend`` import mode puts it on
``sys.path``).

``pdlab/engine/worker/fake_runner.py`` (a model runner without a model) stays in the package: the
shipped exercise 14, the block pool view (``pdlab/ui/block_pool_view.py``) and
``pdlab bench sched`` use it.
"""
