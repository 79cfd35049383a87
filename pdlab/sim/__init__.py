"""``pdlab sim``: a step-level simulator of a decode instance, and what it is built from.

* ``peaks.py``: published GPU peaks (plain data; tools may read them);
* ``profiles.py``: device profiles (published or measured), the link, the launch overhead;
* ``costs.py``: one step's modelled cost in kernel groups, from ``pdlab/sim/kernel_costs.py``;
* ``designs.py``: the price of each first-token design (the ``first_token`` event, priced);
* ``simulator.py``: the simulator; ``report.py``: its statistics.

The choices below are here, importing nothing, so that ``pdlab --help`` needs no torch.
"""

ROUTINGS = ("v2", "pcp", "dcp", "v1")  # V2's default, with PCP, with DCP, V1
DISTRIBUTIONS = ("fixed", "uniform", "exponential", "lognormal")
