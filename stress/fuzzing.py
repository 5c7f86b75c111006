"""Runs a fuzzer module as its own process with a time budget and reads back its JSON report, so a
crash or hang of the fuzzer (or of what it drives) is a finding and not a lost run."""
import json
import os
import subprocess
import sys
import tempfile

from .harness import ROOT, Result


def run_fuzzer(module, seconds, seed=1, name=None):
    """`python -m stress.MODULE --seconds S --seed N --json F`; a Result whose failures are the
    findings no KNOWN case explains (the known ones are listed as notes)."""
    with tempfile.TemporaryDirectory(prefix="larder-fuzz-") as tmp:
        out = os.path.join(tmp, "report.json")
        try:
            p = subprocess.run([sys.executable, "-m", f"stress.{module}", "--seconds", str(seconds), "--seed",
                                str(seed), "--json", out], cwd=ROOT, capture_output=True, timeout=seconds + 120)
            code, stderr = p.returncode, p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired:
            return Result(name or module, False, {"budget (s)": seconds},
                          [f"the fuzzer process did not finish within {seconds + 120} s"])
        if not os.path.exists(out):
            return Result(name or module, False, {"budget (s)": seconds},
                          [f"the fuzzer process exited {code} without a report: {stderr[-1500:]}"])
        with open(out) as f:
            report = json.load(f)
    unknown = [f for f in report["findings"] if not f.get("known")]
    known = [f for f in report["findings"] if f.get("known")]
    failures = [f"{f['oracle']}: {f['detail'][:300]} — reproducer: {f['request'][:1500]}" for f in unknown]
    notes = [f"known ({', '.join(f['known'])}) {f['oracle']}: {f['request'][:200]}" for f in known]
    return Result(name or module, not failures, report["figures"], failures, notes)
