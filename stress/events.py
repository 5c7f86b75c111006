"""Object-change events under SIGKILL: a storm of uploads with one webhook subscription, the server
killed halfway, then restarted. Oracle: every acknowledged upload's `finalized` reaches the receiver
(none missing), and the `finalized` events received are exactly the stored objects (none for an
upload that never committed). The storm itself is interop/test_events.py's (200 uploads in
`make test`; 1,000 here)."""
import os
import pathlib
import sys

from .harness import Result

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop"))


def run(data_dir, uploads=1000):
    from test_events import upload_storm_with_sigkill
    acknowledged, stored, finalized, received = upload_storm_with_sigkill(pathlib.Path(data_dir), uploads)
    failures = []
    if not acknowledged <= finalized:
        failures.append(f"{len(acknowledged - finalized)} acknowledged uploads without their finalized")
    if finalized != stored:
        failures.append(f"events without objects: {sorted(finalized - stored)[:5]}; "
                        f"objects without events: {sorted(stored - finalized)[:5]}")
    figures = {"uploads attempted": uploads, "acknowledged before the kill": len(acknowledged),
               "stored after restart": len(stored), "finalized received (distinct)": len(finalized),
               "deliveries received (with redeliveries)": len(received)}
    return Result("Events under SIGKILL", not failures, figures, failures)
