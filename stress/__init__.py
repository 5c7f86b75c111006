"""Larder's stress harness: scenarios that attack a real `larder serve` (see stress/README.md).

`python -m stress.run` (what `make stress` runs) runs the full version of every scenario and writes
stress/results/latest.md; interop/test_stress_short.py runs the short version of each in `make test`.
"""
