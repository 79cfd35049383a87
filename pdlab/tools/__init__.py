"""What is run beside the engine rather than inside it: the ``pdlab`` commands' tools.

* ``bench.py``: ``pdlab bench paths`` (the two paths' cost) and the bench dispatcher;
* ``bench_kernels.py``: ``pdlab bench kernels``, each kernel timed on this machine;
* ``measure.py``: the timers, this machine's measured ceilings, published GPU peaks;
* ``bench_sched.py``: ``pdlab bench sched``, the scheduler's own time per step;
* ``doctor.py``: ``pdlab doctor``, what this machine has and runs;
* ``aot.py``: compile every Triton kernel for sm_80/sm_90 without a GPU (``doctor --aot``),
  as ``aot_specs.py`` configures each one;
* ``gpu_check.py``: the one command for a GPU owner (``python -m pdlab.tools.gpu_check``);
* ``lab.py``: ``pdlab notebooks`` and ``pdlab lab``;
* ``train.py``, ``corpus.py`` and ``train_config.py``: ``pdlab train``;
* ``bilingual.py``: every notebook in both languages from one source.
"""
