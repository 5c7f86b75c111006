"""Larder's benchmark suite, run by Benchmarks/lib/bench.py (which Benchmarks/run.sh calls).

config      every environment variable (BENCH_*, LARDER_BIN, LARDER_PEERS) and the scenario list
processes   the servers started (stopped at exit), the temp dir, /proc readings (CPU, writes, RSS)
measure     curl, wrk, the tus client, test files
machine     the machine's description and load average
larder      `larder serve` under test
peers/      nginx, tusd, fastapi_tusd, postgres, swift_s3: one module per peer or engine
scenarios/  one module per scenario (BENCH_ONLY name in each docstring)
fmt, report, report_s3   the report (report_s3: the s3 scenario's rows and section)
main        the run: scenarios in order, the report, cleanup
"""
