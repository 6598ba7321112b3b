#!/usr/bin/python3
"""Draws the chart of a `troupe bench` JSON report: latency vs offered load for
throughput, TTFT / inter-token gap distributions for stream, latency distributions for
overhead, runs/s, p99 and memory per concurrent run vs concurrency for agent (troupe and
the peers), rows persisted over time for storage, resident memory per phase for idle.
Usage: chart.py REPORT.json OUT.png (run with MPLBACKEND=Agg)."""

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


def plot_distributions(ax, report, names, labels=None):
    labels = labels or {}
    for name in names:
        curve = report["distributions"].get(name)
        if not curve:
            continue
        xs = [1 / (1 - p / 100) for p, _ in curve if p < 100]
        ys = [v for p, v in curve if p < 100]
        ax.plot(xs, ys, marker="o", markersize=3, label=labels.get(name, name))
    percentile_axis(ax)
    ax.set_ylabel("microseconds")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()


def plot_agent(report, subtitle):
    rows = sorted(report.get("steps", []), key=lambda r: r["concurrency"])
    peers = {}
    for p in report.get("peers", []):
        peers.setdefault(p["peer"], []).append(p)
    series = [("troupe", rows)] + sorted(peers.items())
    panels = [
        ("runs/s", lambda r: r["runs_per_s"], "linear"),
        ("p99 run latency (ms)", lambda r: r["latency_ms"]["p99"], "log"),
        ("KiB per concurrent run", lambda r: r["mem_per_concurrent_run_kb"], "log"),
        ("CPU ms per run", lambda r: r.get("cpu_ms_per_run", 0), "log"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 4.8))
    for ax, (label, get, scale) in zip(axes, panels):
        for name, points in series:
            points = sorted(points, key=lambda r: r["concurrency"])
            xs = [r["concurrency"] for r in points]
            ys = [get(r) for r in points]
            style = dict(linewidth=2.5) if name == "troupe" else dict(linestyle="--")
            ax.plot(xs, ys, marker="o", label=name, **style)
        ax.set_xscale("log")
        ax.set_yscale(scale)
        ax.set_xlabel("concurrent runs (closed loop)")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"troupe bench --scenario agent: LLM -> read -> LLM ({subtitle})")
    return fig


def plot_storage(report, subtitle):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    points = report.get("persisted_series", [])
    ts = [p[0] for p in points]
    for index, name in ((1, "messages"), (2, "runs"), (3, "execution steps")):
        ax1.plot(ts, [p[index] for p in points], label=name)
    ax1.set_xlabel("seconds into the load")
    ax1.set_ylabel("rows persisted")
    ax1.grid(True, alpha=0.3)
    ax1.legend()
    rates_t, rates = [], []
    for a, b in zip(points, points[1:]):
        if b[0] > a[0]:
            rates_t.append(b[0])
            rates.append((b[1] - a[1]) / (b[0] - a[0]))
    ax2.plot(rates_t, rates, marker=".", label="messages/s (per sample)")
    mean = report["metrics"].get("persisted.messages_per_s")
    if mean:
        ax2.axhline(mean, color="gray", linestyle="--", label=f"mean {mean:.0f}/s")
    ax2.set_xlabel("seconds into the load")
    ax2.set_ylabel("messages persisted per second")
    ax2.grid(True, alpha=0.3)
    ax2.legend()
    fig.suptitle(f"troupe bench --scenario storage ({subtitle})")
    return fig


def plot_idle(report, subtitle):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    rows = report.get("steps", [])
    labels = [f"{r['phase']}\n({r['count']})" for r in rows]
    ax1.bar(labels, [r["rss_kib"] / 1024 for r in rows], color="tab:blue", label="troupe VmRSS")
    ax1.set_ylabel("MiB")
    ax1.set_title("troupe resident memory after each step")
    ax1.grid(True, axis="y", alpha=0.3)
    m = report["metrics"]
    names = ["conversation", "waiting run", "subscriber", "all three"]
    keys = ["kib_per_conversation", "kib_per_waiting_run", "kib_per_subscriber",
            "kib_per_conversation_with_subscriber"]
    values = [m.get(k, 0) for k in keys]
    ax2.bar(names, values, color=["tab:blue", "tab:orange", "tab:green", "tab:gray"])
    ax2.axhline(4, color="red", linestyle="--", label="target: 4 KiB per conversation+subscriber")
    ax2.set_ylabel("KiB each (troupe RSS)")
    ax2.set_title(f"per item, N = {int(m.get('conversations', 0))}")
    ax2.grid(True, axis="y", alpha=0.3)
    ax2.legend()
    fig.suptitle(f"troupe bench --scenario idle ({subtitle})")
    return fig


def main():
    report = json.load(open(sys.argv[1]))
    scenario = report["scenario"]
    machine = report.get("machine", {})
    load = machine.get("load_average", [])
    subtitle = f"{machine.get('cores', '?')} cores, load average {load[0]:.1f}" if load else ""
    if scenario in ("agent", "storage", "idle"):
        fig = {"agent": plot_agent, "storage": plot_storage, "idle": plot_idle}[scenario](
            report, subtitle)
        fig.tight_layout()
        fig.savefig(sys.argv[2], dpi=110)
        return
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
        via = "direct.ttft" in report["distributions"]
        labels = {"ttft": "ttft (via)", "gap": "gap (via)"} if via else {}
        plot_distributions(ax, report, ["ttft", "gap", "direct.ttft", "direct.gap"], labels)
    else:
        plot_distributions(ax, report, list(report.get("distributions", {}).keys()))
    ax.set_title(f"troupe bench --scenario {scenario} ({subtitle})")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
