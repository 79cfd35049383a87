"""Shared test set-up.

Import pdlab.kernels before anything else can import triton: the backend module sets
TRITON_INTERPRET on a machine without a GPU, and triton reads it when it is first imported.

Markers (pyproject.toml): ``triton`` tests skip where triton is not installed (macOS, or a
Linux venv without it), so ``make test`` is green there too; ``slow``, ``browser`` and
``notebooks`` are what ``make test-fast`` leaves out.

Every test must pass under pytest-xdist (``make test`` runs one worker per core): no fixed
ports, no shared files outside ``tmp_path``, no order between tests.
"""

import os
from pathlib import Path

import pytest
import torch

import pdlab.kernels  # noqa: F401
from pdlab.kernels.backend import triton_installed

# Under pytest-xdist (`make test`), the workers share the cores: give each its share of torch
# threads instead of every worker starting one per core.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // _workers))
# The MLA backend profile follows the GPU the platform sees (pdlab/engine/platforms.py). Pin the
# CPU platform (CPU_MLA) so the suite means the same on a laptop and on an H100; the tests
# of the choice itself name their GPU. Subprocesses inherit it.
os.environ["PDLAB_GPU"] = "cpu"
os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
if "PYTEST_XDIST_WORKER" in os.environ:
    # xdist's workers start with COLUMNS=80 and LINES=24, which a plain run does not have
    # (pdlab's consoles take COLUMNS as "a terminal of that width" and narrow their tables).
    for _var in ("COLUMNS", "LINES"):
        os.environ.pop(_var, None)


# Trylast: after -m/-k have deselected, so that only tests that will run count.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_notebook_runs_the_browser_does(items)
    _name_xdist_groups(config, items)
    _longest_groups_first(items)
    if triton_installed():
        return
    skip = pytest.mark.skip(reason="needs triton, which is not installed here")
    for item in items:
        if item.get_closest_marker("triton") is not None:
            item.add_marker(skip)


def _name_xdist_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` on pytest 9.2: a worker tells the scheduler each test's group as a
    ``@group`` suffix of its node id, which pytest-xdist 3.8 writes to ``item._nodeid``; pytest
    9.2 reads ``item._id`` instead, so every group was spread over the workers (two JupyterLab
    servers, every AOT kernel compiled twice). Add the suffix where xdist's could not."""
    if not getattr(config.option, "loadgroup", False) or "PYTEST_XDIST_WORKER" not in os.environ:
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest reads item._nodeid: xdist's own suffix works there
        return
    for item in items:
        names = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1] and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


# The two long groups, in the order the workers should start them: with
# --no-loadscope-reorder (the Makefile) xdist hands out work in collection order, one unit to
# each worker first, so the browser group and the AOT builds start on different workers
# instead of queueing behind each other on one.
LONG_GROUPS = ("browser", "aot")


def _longest_groups_first(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        names = {m.args[0] if m.args else "" for m in item.iter_markers("xdist_group")}
        return next((i for i, g in enumerate(LONG_GROUPS) if g in names), len(LONG_GROUPS))

    items.sort(key=rank)  # stable: the rest keep their order


def _browser_available() -> bool:
    from nbtools import find_chromium

    try:
        return find_chromium() is not None
    except ValueError:  # a bad PDLAB_CHROMIUM: the browser tests fail, the kernel runs stay
        return False


def _skip_notebook_runs_the_browser_does(items: list[pytest.Item]) -> None:
    """A notebook that tests/lab/test_browser_notebooks.py runs top to bottom in this session (in
    JupyterLab's kernel, failing on any error output: a superset of the nbclient run) is not
    executed a second time by test_notebooks.py's nbclient run, which stays for every run
    without a browser, or with the browser tests deselected."""
    in_browser = {
        Path(item.callspec.params["notebook"]).stem: item.nodeid
        for item in items
        if item.originalname == "test_notebook_runs_and_renders_its_widgets"
        and item.path.name == "test_browser_notebooks.py"
    }
    runs = [
        item
        for item in items
        if item.originalname == "test_executes_top_to_bottom"
        and item.path.name == "test_notebooks.py"
        and item.callspec.params["name"] in in_browser
    ]
    if not runs or not _browser_available():
        return
    for item in runs:
        node = in_browser[item.callspec.params["name"]].split("::", 1)[1]
        item.add_marker(pytest.mark.skip(reason=f"run top to bottom in the browser by {node}"))


# ---- scheduler test helpers (sched) ------------------------------------------------------
# Shared by tests/engine/test_scheduler*.py: build a Scheduler with a fake runner, step it, and
# check that every block came back. Import them with ``from conftest import ...``. pdlab
# is imported inside the functions so that this block stays apart from the imports above.


def make_scheduler(
    connector=None,
    *,
    budget=64,
    max_seqs=8,
    threshold=0,
    block_size=4,
    num_blocks=64,
    caching=True,
    max_model_len=256,
    sample=None,
    reserve_full_isl=True,
    kv_load_failure_policy="fail",
    speculative_config=None,
    draft=None,
):
    """A Scheduler, a FakeModelRunner driving ``connector``'s worker side, and the list
    the scheduler's events are appended to as ``(kind, fields)``. With a
    ``speculative_config`` the runner drafts K tokens per step with ``draft`` (default:
    agreeing with ``sample`` half the time)."""
    from pdlab.engine.config import CacheConfig, KVTransferConfig, SchedulerConfig
    from pdlab.engine.core.sched.scheduler import Scheduler
    from pdlab.engine.worker.fake_runner import FakeModelRunner

    events = []
    sched = Scheduler(
        SchedulerConfig(
            max_num_batched_tokens=budget,
            max_num_seqs=max_seqs,
            long_prefill_token_threshold=threshold,
            scheduler_reserve_full_isl=reserve_full_isl,
        ),
        CacheConfig(block_size=block_size, num_blocks=num_blocks, enable_prefix_caching=caching),
        max_model_len,
        connector=connector,
        emit=lambda kind, **fields: events.append((kind, fields)),
        kv_transfer_config=KVTransferConfig(kv_load_failure_policy=kv_load_failure_policy),
        speculative_config=speculative_config,
    )
    k = speculative_config.num_speculative_tokens if speculative_config is not None else 0
    runner = FakeModelRunner(connector, sample=sample, num_speculative_tokens=k, draft=draft)
    return sched, runner, events


def step(sched, runner):
    """One schedule / execute / update round, and the drafts handed back as the engine
    does; returns the SchedulerOutput and outputs."""
    so = sched.schedule()
    outputs = sched.update_from_output(so, runner.execute_model(so))
    drafts = runner.take_draft_token_ids()
    if drafts is not None:
        sched.update_draft_token_ids(drafts)
    return so, outputs


def req(rid, n, max_tokens=4, start=0, **sp):
    """A request whose prompt is ``start, start + 1, ..., start + n - 1``."""
    from pdlab.engine.request import Request, SamplingParams

    return Request(rid, [start + i for i in range(n)], SamplingParams(max_tokens=max_tokens, **sp))


def all_free(sched):
    """Every block is back in the pool and no request holds any."""
    mgr = sched.kv_cache_manager
    return (
        mgr.num_free_blocks == mgr.num_blocks
        and not mgr.req_to_blocks
        and all(b.ref_cnt == 0 for b in mgr.block_pool.blocks)
    )


def events_of(events, kind):
    return [f for k, f in events if k == kind]


def free_queue_ids(sched):
    """Block ids in the free queue, next handed out first."""
    return [b.block_id for b in sched.kv_cache_manager.block_pool.free_block_queue]


# ---- end of scheduler test helpers (sched) -------------------------------------------------


# ---- P/D test helpers ---------------------------------------------------------------
def pair_all_free(pair):
    """Every block of both engines of a P/D pair is free and no transfer is pending."""
    for eng in (pair.prefill, pair.decode):
        m = eng.scheduler.kv_cache_manager
        assert m.num_free_blocks == eng.cache_config.num_blocks, f"{eng.instance} leaked blocks"
    assert pair.p_connector.num_pending == 0 and pair.d_connector.num_pending == 0


def cmdline(process) -> str:
    """A process's command line, or "" for one that ended (or is a zombie) between being
    listed and being read: a busy machine reaps short-lived children at any moment."""
    import psutil

    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return ""
