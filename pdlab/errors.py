"""How a caught exception is reported inside the engine: one line, never a traceback.

A request whose forward raises (``pdlab/model/runner.py``) and a KV read that fails
(``pdlab/kv_transfer/``) record the error as text that travels to the user (in a
``RequestOutput``, over a pipe, in the trace). vLLM has no single equivalent; its engine
core logs the traceback and reports the request as errored.
"""

from __future__ import annotations


def one_line(e: BaseException) -> str:
    """``"<ExceptionType>: <first line of the message>"``, at most 300 characters."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def cli_message(e: BaseException) -> str:
    """What ``pdlab <command>: error: ...`` prints: a ``ValueError``/``TypeError`` (or an
    exception marked ``one_line = True``) is its own first line, since its message names the
    argument, the value and what is allowed; anything else adds its type in parentheses."""
    text = str(e).strip().splitlines()
    if (isinstance(e, (ValueError, TypeError)) or getattr(e, "one_line", False)) and text:
        return text[0]
    return f"{text[0]} ({type(e).__name__})" if text else type(e).__name__
