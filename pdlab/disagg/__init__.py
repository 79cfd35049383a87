"""Prefill/decode disaggregation: a P engine and a D engine joined by a KV connector.

* ``pair.py``: :class:`PDPair`, both engines in one process over an in-memory transport;
* ``procs.py``: the same pair as two processes over ``torch.distributed`` (``pdlab pd``);
* ``launch.py``: starts and watches those two processes, and reports a fault in one line.
* ``group.py``: how the two processes find each other (a free port, joining the group);
* ``designs.py``: the four ways D gets its first token (``first_token=`` of both).

The connector and transports they use are in ``pdlab/engine/distributed/kv_transfer/`` (vLLM's
``vllm/distributed/kv_transfer/``).
"""
