"""What the multi-GPU check scripts share: collect one result per rank process from a queue.

``from rank_procs import collect`` (the scripts run as ``python3 scripts/NAME.py``, so this
folder is on ``sys.path``, and spawned children inherit it).
"""
import queue as queue_mod
import time


def collect(procs, queue, n: int, timeout: float):
    """Wait for ``n`` results on ``queue`` from the started ``procs``.

    Returns (results, None), the processes joined; or (None, reason) after killing them all
    when one exited with an error or ``timeout`` seconds passed without all results.
    """
    results, deadline = [], time.monotonic() + timeout
    while len(results) < n:
        try:
            results.append(queue.get(timeout=2))
        except queue_mod.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                return None, (f"process exit codes {dead}" if dead
                              else f"no result within {timeout} s")
    for p in procs:
        p.join()
    return results, None
