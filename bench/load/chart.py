#!/usr/bin/python3
"""Draws the chart of a `troupe bench` JSON report: latency vs offered load for
throughput, TTFT / inter-token gap distributions for stream, latency distributions for
overhead. Usage: chart.py REPORT.json OUT.png (run with MPLBACKEND=Agg)."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def percentile_axis(ax):
    # Percentiles on a log scale of 1/(1-p): tails get the room they deserve.
    ax.set_xscale("log")
    ticks = [0.5, 0.9, 0.99, 0.999, 0.9999]
    ax.set_xticks([1 / (1 - t) for t in ticks])
    ax.set_xticklabels([f"p{t * 100:g}" for t in ticks])
    ax.set_xlabel("percentile")


def plot_distributions(ax, report, names):
    for name in names:
        curve = report["distributions"].get(name)
        if not curve:
            continue
        xs = [1 / (1 - p / 100) for p, _ in curve if p < 100]
        ys = [v for p, v in curve if p < 100]
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    percentile_axis(ax)
    ax.set_ylabel("microseconds")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def main():
    report = json.load(open(sys.argv[1]))
    scenario = report["scenario"]
    machine = report.get("machine", {})
    load = machine.get("load_average", [])
    subtitle = f"{machine.get('cores', '?')} cores, load average {load[0]:.1f}" if load else ""
    fig, ax = plt.subplots(figsize=(8, 5))
    if scenario == "throughput" and len(report.get("steps", [])) > 1:
        steps = sorted(report["steps"], key=lambda s: s["rate"])
        rates = [s["rate"] for s in steps]
        for key in ("p50_us", "p90_us", "p99_us", "p99_9_us"):
            ax.plot(rates, [s[key] for s in steps], marker="o", label=key.replace("_us", ""))
        bad = [s for s in steps if not s["pass"]]
        ax.scatter([s["rate"] for s in bad], [s["p99_us"] for s in bad], color="red",
                   zorder=5, label="failed step")
        bound = report["metrics"].get("p99_bound_us")
        if bound:
            ax.axhline(bound, color="gray", linestyle="--", label="p99 bound")
        ax.set_xlabel("offered rate (requests/s, open loop)")
        ax.set_ylabel("latency from intended send (us)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    elif scenario == "stream":
        plot_distributions(ax, report, ["ttft", "gap"])
    else:
        plot_distributions(ax, report, list(report.get("distributions", {}).keys()))
    ax.set_title(f"troupe bench --scenario {scenario} ({subtitle})")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
