"""Calls in a forked child, for the sweeps of mutated programs: a program
that got past the load checks could abort the process (ExecuTorch's
ET_CHECK) or run foreign code, and the test must see that as an outcome,
not die of it or share its effects."""

from __future__ import annotations

import os
import pickle


def in_child(fn, *args):
    """fn(*args) in a forked child: ("returned", value), ("raised", (type,
    message, EtCopyError.error or None)), or ("signal", number)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running any cleanup of the parent's
        status = 0
        try:
            os.close(r)
            try:
                result = ("returned", fn(*args))
            except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
                result = ("raised", (type(e).__name__, str(e), getattr(e, "error", None)))
            with os.fdopen(w, "wb") as f:
                f.write(pickle.dumps(result))
        except BaseException:  # noqa: BLE001
            status = 1
        finally:
            os._exit(status)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        payload = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("signal", os.WTERMSIG(status))
    assert os.WEXITSTATUS(status) == 0 and payload, f"the child failed to report (exit {os.WEXITSTATUS(status)})"
    return pickle.loads(payload)
