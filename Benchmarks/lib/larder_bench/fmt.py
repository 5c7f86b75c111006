"""Figures as the report prints them, and the medians and verdicts behind them."""
import re
import statistics

from .config import MB


def fmt_s(x):
    return f"{x:.2f}"


def fmt_mb(x):
    return f"{x / MB:,.0f}"


def p99_us(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text or "")
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def runs_text(xs, fmt="{:.2f}"):
    return ", ".join(fmt.format(x) for x in xs)


def verdict(value, goal, higher_is_better=True):
    if goal is None or value != value:  # NaN
        return "—"
    return "yes" if (value >= goal if higher_is_better else value <= goal) else "**no**"
