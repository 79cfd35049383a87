"""Test machinery for pdlab's notebooks.

Headless execution (nbclient), ``.ipynb``/jupytext ``.py`` sync checks, a throwaway JupyterLab
server, and playwright helpers that drive ipywidgets in a real Chromium or Chrome.

Tests import it as ``from nbtools import ...``: ``tests/`` has no ``__init__.py``, so pytest's
default ``prepend`` import mode puts ``tests/`` on ``sys.path``.

Browser helpers need the page to come from :func:`running_jupyterlab` (or :func:`lab_page`),
which starts JupyterLab with ``--LabApp.expose_app_in_browser=True``: the helpers call
JupyterLab's own commands and models through ``window.jupyterapp`` instead of guessing from
pixels, and only use the DOM for the widgets themselves (the way a person would use them).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pdlab.disagg.group import free_port

CHROMIUM_ENV = "PDLAB_CHROMIUM"
# Looked up on PATH in this order: Debian/Ubuntu/Fedora/Arch names, then Google Chrome's.
CHROMIUM_NAMES = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
)
# Where macOS keeps them (not on PATH).
CHROMIUM_APPS = (
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
)
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--metrics-recording-only",
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


# --------------------------------------------------------------------------------------------
# 1. headless execution
# --------------------------------------------------------------------------------------------


class NotebookExecutionError(AssertionError):
    """A cell raised. ``str()`` shows the notebook, the cell's index and source, the traceback."""

    def __init__(self, path: Path, index: int, source: str, traceback: str, ename: str = ""):
        self.path, self.index, self.source, self.ename = path, index, source, ename
        self.traceback = strip_ansi(traceback)
        super().__init__(
            f"{path}: cell {index} raised {ename or 'an error'}\n"
            f"----- cell {index} source -----\n{source}\n"
            f"----- traceback -----\n{self.traceback}"
        )


def _venv_kernel_manager(kernel_name: str = "python3"):
    """A kernel manager that only sees this interpreter's kernelspecs (no ~/.local ones).

    The venv's ``python3`` spec runs ``python -m ipykernel_launcher``, and jupyter_client swaps
    ``python`` for ``sys.executable``; without any spec, ipykernel's native one is used.
    """
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    ksm = KernelSpecManager(kernel_dirs=[os.path.join(sys.prefix, "share", "jupyter", "kernels")])
    return AsyncKernelManager(kernel_name=kernel_name, kernel_spec_manager=ksm)


def execute_notebook(path, timeout: int = 600, cwd=None) -> tuple[Any, float]:
    """Run ``path`` (an .ipynb) top to bottom in a fresh ``python3`` kernel of this venv.

    Returns ``(executed_nb, seconds)``; the file on disk is not modified. The kernel runs in
    ``cwd`` (default: the notebook's folder) with ``os.environ``. ``timeout`` is per cell.
    Raises :class:`NotebookExecutionError` (cell index, source, traceback) if a cell errors,
    and ``RuntimeError`` if the kernel is not this interpreter's.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    cwd = str(Path(cwd) if cwd is not None else path.resolve().parent)
    nb = nbformat.read(path, as_version=4)
    km = _venv_kernel_manager()
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", km=km, resources={"metadata": {"path": cwd}}
    )
    t0 = time.perf_counter()
    try:
        with client.setup_kernel(cwd=cwd, env=dict(os.environ)):
            # a silent request: no execution count used, no output
            msg_id = client.kc.execute(
                "",
                silent=True,
                store_history=False,
                user_expressions={"p": "__import__('sys').prefix"},
            )
            reply = client.wait_for_reply(msg_id) or {}
            expr = reply.get("content", {}).get("user_expressions", {}).get("p", {})
            got = ast.literal_eval(expr.get("data", {}).get("text/plain", "''"))
            if os.path.realpath(got) != os.path.realpath(sys.prefix):
                raise RuntimeError(f"kernel runs in prefix {got!r}, expected {sys.prefix!r}")
            client.code_cells_executed = 0
            for index, cell in enumerate(nb.cells):
                try:
                    client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
                except CellExecutionError as exc:
                    raise NotebookExecutionError(
                        path, index, cell.source, exc.traceback, exc.ename
                    ) from None
    finally:
        # we own km (NotebookClient only cleans up kernels it created itself)
        with contextlib.suppress(Exception):
            client._cleanup_kernel()
        with contextlib.suppress(Exception):
            if km.has_kernel:
                from jupyter_core.utils import run_sync

                run_sync(km.shutdown_kernel)(now=True)
    return nb, time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# 2. .ipynb <-> jupytext percent .py
# --------------------------------------------------------------------------------------------


def _norm(source: str) -> str:
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").split("\n")]
    return "\n".join(lines).strip("\n")


def check_in_sync(ipynb_path, py_path=None) -> list[str]:
    """Differences between an .ipynb and its percent-format .py twin (same stem by default).

    Compares the sequence of (cell type, source) with trailing whitespace and surrounding blank
    lines ignored; outputs and metadata are ignored. An empty list means in sync.
    """
    import jupytext

    ipynb_path = Path(ipynb_path)
    py_path = Path(py_path) if py_path is not None else ipynb_path.with_suffix(".py")
    if not py_path.exists():
        return [f"{py_path} is missing"]
    a = jupytext.read(ipynb_path)
    b = jupytext.read(py_path, fmt="py:percent")

    def cells(nb):
        return [(c.cell_type, _norm(c.source)) for c in nb.cells]

    ca, cb = cells(a), cells(b)
    diffs: list[str] = []
    if len(ca) != len(cb):
        diffs.append(f"{ipynb_path.name} has {len(ca)} cells, {py_path.name} has {len(cb)}")
    for i, ((ta, sa), (tb, sb)) in enumerate(zip(ca, cb)):
        if ta != tb:
            diffs.append(f"cell {i}: type {ta} in {ipynb_path.name}, {tb} in {py_path.name}")
        elif sa != sb:
            la, lb = sa.splitlines(), sb.splitlines()
            j = next(
                (k for k in range(min(len(la), len(lb))) if la[k] != lb[k]), min(len(la), len(lb))
            )
            diffs.append(
                f"cell {i} ({ta}) differs at line {j + 1}: "
                f"{(la[j] if j < len(la) else '<end>')!r} != "
                f"{(lb[j] if j < len(lb) else '<end>')!r}"
            )
    return diffs


# --------------------------------------------------------------------------------------------
# 3. a throwaway JupyterLab
# --------------------------------------------------------------------------------------------


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _kill_all(procs, sig=signal.SIGKILL) -> None:
    import psutil

    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)
    psutil.wait_procs(procs, timeout=5)


_LAB_SETTINGS = {
    # no toasts, no news, no update check (the network is closed anyway)
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "doNotDisturbMode": True,
        "fetchNews": "false",
    },
    # never write the (executed) notebook back to disk
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # every cell in the DOM (no virtual scrolling), no "select kernel" dialog
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
}


@contextlib.contextmanager
def running_jupyterlab(
    root_dir, timeout: float = 60.0, extra_args: tuple[str, ...] = ()
) -> Iterator[tuple[str, str]]:
    """Start ``jupyter lab`` on a free 127.0.0.1 port serving ``root_dir``; yield (base_url, token).

    Hermetic: config/data/runtime/settings/workspace/checkpoint dirs live in a temp dir (removed
    on exit), so no user config, saved workspace or user kernelspec leaks in, and nothing is
    written under ``root_dir`` (autosave off, no .ipynb_checkpoints). No news, no update check,
    ``window.jupyterapp`` exposed. On exit: ``/api/shutdown`` (stops kernels), then SIGTERM /
    SIGKILL to the server's process group and every descendant (kernels run in their own
    sessions, so a group kill alone would leak them).
    """
    root_dir = Path(root_dir).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="pdlab-lab-"))
    token = secrets.token_hex(16)
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
    ]:
        (tmp / sub).mkdir()
        env[var] = str(tmp / sub)
    env.pop("JUPYTER_TOKEN", None)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["JUPYTER_PATH"] = os.pathsep.join(
        [os.path.join(sys.prefix, "share", "jupyter")]
        + [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    )
    for rel, data in _LAB_SETTINGS.items():
        f = tmp / "settings" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(data))

    proc = None
    log = tmp / "server.log"
    base_url = ""
    try:
        for _attempt in range(3):
            port = free_port()
            base_url = f"http://127.0.0.1:{port}"
            cmd = [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root_dir}",
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
                "--LabApp.expose_app_in_browser=True",
                "--LabApp.extension_manager=readonly",
                f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}",
                *(["--allow-root"] if os.geteuid() == 0 else []),
                *extra_args,
            ]
            logf = open(log, "ab")  # noqa: SIM115 - closed below
            try:
                proc = subprocess.Popen(
                    cmd,
                    cwd=root_dir,
                    env=env,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            finally:
                logf.close()
            if _wait_ready(proc, f"{base_url}/api/status?token={token}", timeout):
                break
            _stop_server(proc, base_url, token)
            proc = None
        else:
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise RuntimeError(f"JupyterLab did not start within {timeout}s:\n{tail}")
        yield base_url, token
    finally:
        if proc is not None:
            _stop_server(proc, base_url, token)
        shutil.rmtree(tmp, ignore_errors=True)


def _wait_ready(proc, status_url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(status_url, timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    return False


def _stop_server(proc, base_url: str, token: str) -> None:
    procs = _descendants(proc.pid)
    if proc.poll() is None:
        with contextlib.suppress(urllib.error.URLError, OSError):
            req = urllib.request.Request(
                f"{base_url}/api/shutdown",
                method="POST",
                data=b"",
                headers={"Authorization": f"token {token}"},
            )
            urllib.request.urlopen(req, timeout=5).close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything left in the server's group
    _kill_all([p for p in procs if p.is_running()])


# --------------------------------------------------------------------------------------------
# 5. the browser
# --------------------------------------------------------------------------------------------


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_chromium(env=None, which=shutil.which, apps=CHROMIUM_APPS) -> str | None:
    """The browser to drive: ``$PDLAB_CHROMIUM`` (a path, or a name on PATH), else the first
    of :data:`CHROMIUM_NAMES` on PATH, else a macOS app; None when there is none.

    Raises ValueError when ``$PDLAB_CHROMIUM`` is set to something that is not an executable:
    a browser the user named explicitly must not be silently replaced or skipped.
    """
    env = os.environ if env is None else env
    named = env.get(CHROMIUM_ENV, "").strip()
    if named:
        found = named if _executable(named) else which(named)
        if not found:
            raise ValueError(
                f"{CHROMIUM_ENV}={named!r} is not an executable file or a command on PATH; "
                "expected the path of Chromium or Google Chrome"
            )
        return found
    for name in CHROMIUM_NAMES:
        found = which(name)
        if found:
            return found
    return next((app for app in apps if _executable(app)), None)


def require_chromium() -> str:
    """The browser's path (:func:`find_chromium`); skip the test when there is none, or FAIL
    when ``PDLAB_REQUIRE_BROWSER`` is set."""
    try:
        exe = find_chromium()
    except ValueError as e:
        pytest.fail(str(e), pytrace=False)
    if exe is not None:
        return exe
    msg = (
        f"no Chromium or Chrome found (PATH: {', '.join(CHROMIUM_NAMES)}; or set "
        f"{CHROMIUM_ENV}=/path/to/chrome; Debian: apt-get install chromium)"
    )
    if os.environ.get("PDLAB_REQUIRE_BROWSER", "") not in ("", "0"):
        pytest.fail(f"{msg}, and PDLAB_REQUIRE_BROWSER is set", pytrace=False)
    pytest.skip(msg)


def launch_chromium(playwright, **kwargs):
    """``playwright.chromium.launch`` on :func:`require_chromium`'s browser, headless, with
    offline-friendly flags."""
    exe = require_chromium()
    args = [*CHROMIUM_ARGS, *kwargs.pop("args", [])]
    return playwright.chromium.launch(executable_path=exe, headless=True, args=args, **kwargs)


@dataclass
class LabPage:
    page: Any
    base_url: str
    token: str
    root_dir: Path
    console_errors: list[str] = field(default_factory=list)

    def open(self, rel_path: str, timeout: float = 60.0) -> None:
        open_notebook(self.page, self.base_url, self.token, rel_path, timeout=timeout)


def _screenshot_dir() -> Path:
    return Path(
        os.environ.get("PDLAB_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "pdlab-screenshots"
    )


def _api(base_url: str, token: str, path: str, method: str = "GET"):
    """One JupyterLab REST call; the decoded JSON reply (None for an empty one)."""
    req = urllib.request.Request(
        f"{base_url}{path}", method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        body = r.read()
    return json.loads(body) if body else None


def lab_kernels(base_url: str, token: str, under: str = "") -> list[str]:
    """Ids of the kernels the server runs for notebooks under ``under`` (a folder relative to
    its root; "" = all), session-less kernels included when ``under`` is ""."""
    sessions = _api(base_url, token, "/api/sessions") or []
    prefix = under.strip("/") + "/" if under.strip("/") else ""
    ids = [s["kernel"]["id"] for s in sessions if s.get("path", "").startswith(prefix)]
    if not prefix:
        ids += [k["id"] for k in _api(base_url, token, "/api/kernels") or [] if k["id"] not in ids]
    return ids


def shutdown_kernels(base_url: str, token: str, under: str = "") -> None:
    """Shut down the sessions (and their kernels) of the notebooks under ``under`` ("" = every
    session, then every kernel left). Each DELETE returns once its kernel has stopped."""
    prefix = under.strip("/") + "/" if under.strip("/") else ""
    for s in _api(base_url, token, "/api/sessions") or []:
        if s.get("path", "").startswith(prefix):
            with contextlib.suppress(urllib.error.HTTPError):  # already gone
                _api(base_url, token, f"/api/sessions/{s['id']}", method="DELETE")
    if not prefix:
        for k in _api(base_url, token, "/api/kernels") or []:
            with contextlib.suppress(urllib.error.HTTPError):
                _api(base_url, token, f"/api/kernels/{k['id']}", method="DELETE")


@dataclass
class BrowserLab:
    """One JupyterLab server and one headless Chromium, shared by many pages (see
    :func:`browser_lab`): :meth:`page` gives each user a browser context of its own,
    :meth:`notebook` opens one notebook after another in one shared Lab page."""

    browser: Any
    base_url: str
    token: str
    root_dir: Path
    _shared: Any = field(default=None, repr=False)  # (context, LabPage) of notebook()

    def _new_page(self, viewport) -> tuple[Any, LabPage]:
        ctx = self.browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
        page = ctx.new_page()
        page.set_default_timeout(30_000)
        lp = LabPage(page, self.base_url, self.token, self.root_dir)
        page.on("console", lambda m: m.type == "error" and lp.console_errors.append(m.text))
        page.on("pageerror", lambda e: lp.console_errors.append(f"pageerror: {e}"))
        return ctx, lp

    @contextlib.contextmanager
    def page(
        self, folder: str = "", failure_screenshot=None, viewport=(1280, 1000)
    ) -> Iterator[LabPage]:
        """A fresh browser context + page on this lab; yields a :class:`LabPage`.

        ``folder`` (relative to the server's root) is where the caller's notebooks live: on
        exit the page's context is closed and the kernels of the notebooks under it are shut
        down (every kernel when it is ""). On an exception in the block a screenshot is saved
        (``failure_screenshot``, default ``$PDLAB_SCREENSHOT_DIR`` or
        ``$TMPDIR/pdlab-screenshots/<test>.png``), its path and the browser's console errors
        are printed (pytest shows them with the failure).
        """
        ctx, lp = self._new_page(viewport)
        failed = False
        try:
            try:
                yield lp
            except BaseException as exc:
                failed = True
                _report_failure(lp, exc, failure_screenshot)
                raise
        finally:
            with contextlib.suppress(Exception):
                ctx.close()
            try:
                shutdown_kernels(self.base_url, self.token, under=folder)
            except Exception:
                if not failed:  # else the block's own exception says more
                    raise

    @contextlib.contextmanager
    def notebook(
        self,
        rel_path: str,
        folder: str,
        failure_screenshot=None,
        viewport=(1280, 1000),
        timeout: float = 60.0,
    ) -> Iterator[LabPage]:
        """``rel_path`` (under ``folder``) open and its kernel idle, in the one Lab page that
        every call shares, the way a reader opens one notebook after another: the first
        call loads JupyterLab (most of a fresh page's cost), later ones open through
        ``docmanager:open``. On exit the notebook is closed and the kernels under ``folder``
        shut down. On an exception it is reported as :meth:`page` does, and the shared page
        is closed too: the next call starts on a fresh one."""
        first = self._shared is None
        if first:
            self._shared = self._new_page(viewport)
        ctx, lp = self._shared
        lp.console_errors.clear()
        failed = False
        try:
            try:
                if not first:
                    lp.page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
                    open_in_lab(lp.page, rel_path, timeout=timeout)
                else:
                    lp.open(rel_path, timeout=timeout)
                yield lp
                close_notebooks(lp.page)
            except BaseException as exc:
                failed = True
                _report_failure(lp, exc, failure_screenshot)
                self._shared = None
                with contextlib.suppress(Exception):
                    ctx.close()
                raise
        finally:
            try:
                shutdown_kernels(self.base_url, self.token, under=folder)
            except Exception:
                if not failed:
                    raise


def _report_failure(lp: LabPage, exc: BaseException, failure_screenshot) -> None:
    """A screenshot of the page and its console errors, on stderr, for a failed block."""
    if isinstance(exc, pytest.skip.Exception):
        return
    name = re.sub(r"\W+", "_", os.environ.get("PYTEST_CURRENT_TEST", "lab"))
    shot = Path(failure_screenshot or _screenshot_dir() / f"{name[:120]}.png")
    with contextlib.suppress(Exception):
        screenshot(lp.page, shot)
        print(f"[nbtools] failure screenshot: {shot}", file=sys.stderr)
    if lp.console_errors:
        print(
            "[nbtools] browser console errors:\n  " + "\n  ".join(lp.console_errors[-20:]),
            file=sys.stderr,
        )


@contextlib.contextmanager
def browser_lab(root_dir, timeout: float = 60.0) -> Iterator[BrowserLab]:
    """JupyterLab on ``root_dir`` (:func:`running_jupyterlab`) + one headless Chromium; yields
    a :class:`BrowserLab` whose :meth:`~BrowserLab.page` opens pages on it. Skips (or fails,
    see :func:`require_chromium`) before starting anything when there is no browser.
    Everything is shut down on exit."""
    from playwright.sync_api import sync_playwright

    require_chromium()  # skip before starting a server for nothing
    with (
        running_jupyterlab(root_dir, timeout=timeout) as (base_url, token),
        sync_playwright() as pw,
    ):
        browser = launch_chromium(pw)
        try:
            yield BrowserLab(browser, base_url, token, Path(root_dir))
        finally:
            browser.close()


@contextlib.contextmanager
def lab_page(
    root_dir, failure_screenshot=None, viewport=(1280, 1000), timeout: float = 60.0
) -> Iterator[LabPage]:
    """JupyterLab on ``root_dir`` + headless Chromium + one page; yields a :class:`LabPage`.

    A :func:`browser_lab` of its own with one :meth:`BrowserLab.page`: on an exception in the
    block a screenshot is saved and its path printed. Everything is shut down on exit. Tests
    that open many notebooks share one :func:`browser_lab` instead (one server, one browser).
    """
    with (
        browser_lab(root_dir, timeout=timeout) as lab,
        lab.page(failure_screenshot=failure_screenshot, viewport=viewport) as lp,
    ):
        yield lp


def screenshot(page, path) -> Path:
    """Save a PNG of the page (creating folders); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


# --------------------------------------------------------------------------------------------
# 4. JupyterLab + ipywidgets helpers (playwright sync API)
# --------------------------------------------------------------------------------------------

# JS snippets: `nb()` finds the current notebook panel through the exposed app.
_JS_NB = """
const nb = () => {
  const app = window.jupyterapp;
  if (!app) throw new Error('window.jupyterapp missing: start lab with expose_app_in_browser');
  const w = app.shell.currentWidget;
  return (w && w.content && w.sessionContext && w.context) ? w : null;
};
"""


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def open_notebook(page, base_url: str, token: str, rel_path: str, timeout: float = 60.0) -> None:
    """Open ``rel_path`` (relative to the server's root) and wait until its kernel is idle."""
    url = f"{base_url}/lab/tree/{urllib.parse.quote(rel_path)}?" + urllib.parse.urlencode(
        {"token": token}
    )
    page.goto(url, timeout=_ms(timeout))
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=_ms(timeout)
    )
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=_ms(timeout))
    _wait_notebook_ready(page, rel_path, timeout)


def open_in_lab(page, rel_path: str, timeout: float = 60.0) -> None:
    """Open ``rel_path`` in the JupyterLab this page already shows, as a reader opening a
    second notebook does (``docmanager:open``), and wait until its kernel is idle."""
    page.evaluate(
        "(path) => window.jupyterapp.commands.execute('docmanager:open', {path})", rel_path
    )
    _wait_notebook_ready(page, rel_path, timeout)


def close_notebooks(page) -> None:
    """Close every document in the main area without asking to save (they are throwaway
    copies): their panels, outputs and widget views leave the page."""
    page.evaluate(
        """() => { for (const w of [...window.jupyterapp.shell.widgets('main')]) {
                     if (w.context) w.context.model.dirty = false;
                     w.dispose(); } }"""
    )


def _wait_notebook_ready(page, rel_path: str, timeout: float) -> None:
    page.wait_for_function(
        "(path) => {"
        + _JS_NB
        + """
          const w = nb();
          if (!w || w.context.path !== path || !w.context.isReady) return false;
          const k = w.sessionContext.session && w.sessionContext.session.kernel;
          return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
        }""",
        arg=rel_path,
        timeout=_ms(timeout),
        polling=100,
    )
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first.wait_for(
        timeout=_ms(timeout)
    )


def kernel_flush(page, timeout: float = 60.0) -> None:
    """Wait until the kernel has handled every message sent so far, and its output arrived.

    Runs a silent empty execute twice and awaits each one's reply *and* idle status (iopub is
    ordered, so every widget update sent before has been applied). Twice, because ipywidgets
    holds back a sync message while an earlier one is pending.
    """
    page.evaluate(
        "async (ms) => {"
        + _JS_NB
        + """
        const w = nb();
        const timeout = new Promise((_, rej) => setTimeout(
            () => rej(new Error('kernel did not answer within ' + ms + ' ms')), ms));
        const run = async () => {
          for (let i = 0; i < 2; i++) {
            const k = w.sessionContext.session.kernel;
            await k.requestExecute({code: '', silent: true, store_history: false}).done;
          }
        };
        await Promise.race([run(), timeout]);
      }""",
        _ms(timeout),
    )


def wait_for_widgets(page, timeout: float = 30.0) -> bool:
    """Wait until no output shows 'Loading widget...'; False if some still do after timeout."""
    try:
        page.wait_for_function(
            """() => [...document.querySelectorAll('.jp-OutputArea-output')].every(
                 el => !(el.children.length === 0
                         && el.textContent.trim() === 'Loading widget...'))""",
            timeout=_ms(timeout),
            polling=100,
        )
        return True
    except Exception:
        return False


def run_all_cells(
    page, timeout: float = 600.0, raise_on_error: bool = True, widget_timeout: float = 30.0
) -> bool:
    """Run → Run All Cells (JupyterLab's ``notebook:run-all-cells``) on the current notebook.

    Waits until every cell ran (the command's promise), the kernel is idle, every code cell has
    an execution count and widget views are rendered (at most ``widget_timeout`` s: a view that
    never renders is reported by :func:`widget_errors`). Returns True if no cell raised; with
    ``raise_on_error`` a failing run raises ``AssertionError`` listing :func:`widget_errors`.
    """
    ok = page.evaluate(
        "async (ms) => {"
        + _JS_NB
        + """
        const w = nb();
        if (!w) throw new Error('no notebook is the current widget');
        const timeout = new Promise((_, rej) => setTimeout(
            () => rej(new Error('Run All Cells did not finish within ' + ms + ' ms')), ms));
        const res = await Promise.race(
            [window.jupyterapp.commands.execute('notebook:run-all-cells'), timeout]);
        return res !== false;
      }""",
        _ms(timeout),
    )
    kernel_flush(page, timeout=timeout)
    if ok:
        page.wait_for_function(
            "() => {"
            + _JS_NB
            + """
            const w = nb();
            return w.content.widgets.every(c => c.model.type !== 'code'
                || !c.model.sharedModel.getSource().trim() || c.model.executionCount !== null);
          }""",
            timeout=_ms(timeout),
            polling=100,
        )
    wait_for_widgets(page, timeout=min(timeout, widget_timeout))
    if not ok and raise_on_error:
        errs = widget_errors(page)
        raise AssertionError("Run All Cells failed:\n" + "\n\n".join(errs or ["(no output)"]))
    return ok


def widget_errors(page) -> list[str]:
    """Texts of the problems visible in the current notebook, ANSI colours stripped.

    - cell error outputs: ``"ename: evalue\\n" + traceback``;
    - cell stderr outputs that contain a ``Traceback``;
    - inside widgets (e.g. an ``Output`` widget capturing a callback): stderr/error renderings
      that contain a ``Traceback``;
    - "Error displaying widget[: model not found]", ipywidgets' error views ("Failed to load
      model class ..."), and widget outputs still stuck at "Loading widget..." (an unknown
      model: call this after :func:`run_all_cells`, which waits for widgets to render).
    """
    return page.evaluate(
        "() => {"
        + _JS_NB
        + """
        const out = [];
        const add = t => { t = t.replace(/\\x1b\\[[0-9;?]*[A-Za-z]/g, '').trim();
                           if (t && !out.includes(t)) out.push(t); };
        const w = nb();
        if (!w) return ['no notebook is the current widget'];
        for (const c of w.content.widgets) {
          if (c.model.type !== 'code') continue;
          const outs = c.model.outputs;
          for (let i = 0; i < outs.length; i++) {
            const o = outs.get(i).toJSON();
            if (o.output_type === 'error')
              add(`${o.ename}: ${o.evalue}\\n` + (o.traceback || []).join('\\n'));
            else if (o.output_type === 'stream' && o.name === 'stderr') {
              const t = Array.isArray(o.text) ? o.text.join('') : String(o.text);
              if (/Traceback/.test(t)) add(t);
            }
          }
        }
        const root = w.node;
        root.querySelectorAll('.jupyter-widgets .jp-RenderedText[data-mime-type=' +
                              '"application/vnd.jupyter.stderr"]')
            .forEach(el => { if (/Traceback/.test(el.textContent)) add(el.textContent); });
        root.querySelectorAll('.jupyter-widgets-error-widget').forEach(el => add(el.textContent));
        root.querySelectorAll('.jp-OutputArea-output').forEach(el => {
          const t = el.textContent.trim();
          if (el.children.length === 0 && t === 'Loading widget...')
            add('widget never rendered (Loading widget...)');
          else if (/^Error displaying widget/.test(t)) add(t);
        });
        return out;
      }"""
    )


def _label_re(description: str) -> re.Pattern:
    return re.compile(rf"^\s*{re.escape(description)}\s*$")


def find_widget(page, description: str, css: str = ".widget-inline-hbox", timeout: float = 30.0):
    """The one widget matching ``css`` whose description label is exactly ``description``."""
    # Checkbox shows its description in a .widget-label-basic next to the box
    label = page.locator(".widget-label, .widget-label-basic", has_text=_label_re(description))
    loc = page.locator(f".jp-NotebookPanel:not(.lm-mod-hidden) {css}").filter(has=label)
    try:
        loc.first.wait_for(state="visible", timeout=_ms(timeout))
    except Exception as exc:
        raise AssertionError(f"no visible widget {css} with description {description!r}") from exc
    n = loc.count()
    if n != 1:
        raise AssertionError(f"{n} widgets {css} with description {description!r}; expected 1")
    return loc


def set_dropdown(page, description: str, value: str, settle: bool = True) -> None:
    """Pick the option whose label is ``value`` in the Dropdown described ``description``."""
    sel = find_widget(page, description, ".widget-dropdown").locator("select")
    sel.select_option(label=str(value))
    got = sel.evaluate("s => s.options[s.selectedIndex] && s.options[s.selectedIndex].text")
    if got != str(value):
        raise AssertionError(f"dropdown {description!r} shows {got!r} after selecting {value!r}")
    if settle:
        kernel_flush(page)


def _readout_matches(text: str, value) -> bool:
    text = text.strip()
    if text == str(value):
        return True
    try:
        return abs(float(text.replace(",", "")) - float(value)) <= 1e-9 * max(1, abs(float(value)))
    except ValueError:
        return False


def _is_number(value) -> bool:
    if isinstance(value, bool):
        return False
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def set_slider(page, description: str, value, settle: bool = True, max_steps: int = 500) -> None:
    """Set the slider described ``description`` to ``value`` through its UI.

    A numeric ``value`` is typed into the editable readout + Enter (Int/Float/log sliders).
    Otherwise, or if that did not move the handle (SelectionSlider), the handle is focused,
    sent to Home and moved with ArrowRight until the readout reads ``value`` (each step syncs).
    Raises ``AssertionError`` if the readout never shows ``value``.
    """
    box = find_widget(page, description, ".widget-slider")
    readout = box.locator(".widget-readout")
    handle = box.locator(".noUi-handle").first
    done = _readout_matches(readout.inner_text(), value)
    if (
        not done
        and _is_number(value)
        and readout.is_visible()
        and readout.get_attribute("contenteditable") == "true"
    ):
        before = handle.get_attribute("aria-valuenow")
        readout.click()
        readout.fill(str(value))
        readout.press("Enter")
        kernel_flush(page)
        done = (
            _readout_matches(readout.inner_text(), value)
            and handle.get_attribute("aria-valuenow") != before
        )
    if not done:
        handle.focus()
        handle.press("Home")
        for _ in range(max_steps):
            if _readout_matches(readout.inner_text(), value):
                break
            before = handle.get_attribute("aria-valuenow")
            handle.press("ArrowRight")
            if handle.get_attribute("aria-valuenow") == before:
                break
    cur = readout.inner_text()
    if not _readout_matches(cur, value):
        raise AssertionError(f"slider {description!r} reads {cur!r}, wanted {value!r}")
    if settle:
        kernel_flush(page)


def set_toggle_buttons(page, description: str, value: str, settle: bool = True) -> None:
    """Click the button labelled ``value`` in the ToggleButtons described ``description``."""
    box = find_widget(page, description, ".widget-toggle-buttons")
    btn = box.locator("button", has_text=_label_re(str(value)))
    btn.click()
    if "mod-active" not in (btn.get_attribute("class") or ""):
        btn.page.wait_for_function(
            "b => b.classList.contains('mod-active')", arg=btn.element_handle(), timeout=10_000
        )
    if settle:
        kernel_flush(page)


def set_checkbox(page, description: str, checked: bool, settle: bool = True) -> None:
    box = find_widget(page, description, ".widget-checkbox")
    box.locator("input[type=checkbox]").set_checked(checked)
    if settle:
        kernel_flush(page)


def set_text(page, description: str, text: str, settle: bool = True) -> None:
    """Type into a Text/IntText/FloatText widget and press Enter (submits, syncs value)."""
    box = find_widget(page, description, ".widget-text")
    inp = box.locator("input")
    inp.fill(str(text))
    inp.press("Enter")
    if settle:
        kernel_flush(page)


def click_button(page, description: str, settle: bool = True) -> None:
    """Click the ipywidgets Button whose text is ``description``."""
    loc = page.locator(
        ".jp-NotebookPanel:not(.lm-mod-hidden) button.jupyter-button",
        has_text=_label_re(description),
    )
    loc.first.wait_for(state="visible", timeout=30_000)
    if loc.count() != 1:
        raise AssertionError(f"{loc.count()} buttons {description!r}; expected 1")
    loc.click()
    if settle:
        kernel_flush(page)


def _css(selector: str) -> str:
    return selector if re.search(r"[.#\[\s>:]", selector) else "." + selector


def read_output_text(page, selector: str, timeout: float = 30.0) -> str:
    """``inner_text`` of the one element matching ``selector`` (a bare name means a CSS class:
    ``"pdlab-route"`` == ``".pdlab-route"``, e.g. set with ``widget.add_class``)."""
    loc = page.locator(_css(selector))
    loc.first.wait_for(state="attached", timeout=_ms(timeout))
    if loc.count() != 1:
        raise AssertionError(f"{loc.count()} elements match {selector!r}; expected 1")
    return loc.inner_text()


def wait_for_output_text(page, selector: str, expected, timeout: float = 30.0) -> str:
    """Wait until the element's text equals ``expected`` (str) or matches it (regex)."""
    from playwright.sync_api import expect

    loc = page.locator(_css(selector))
    expect(loc).to_have_text(expected, timeout=_ms(timeout))
    return loc.inner_text()
