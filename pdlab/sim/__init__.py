"""``pdlab sim``: a step-level simulator of a decode instance, and what it is built from.

* ``profiles.py``: device profiles (published peaks with their sources, this machine
  measured), the link and the launch overhead, each a named parameter;
* ``costs.py``: one step's modelled cost in kernel groups, from ``pdlab/attention/cost.py``.
"""
