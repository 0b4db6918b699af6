#!/usr/bin/env python3
"""trace_timeline.py: a PNG timeline of a trace file blk wrote (BLK_TRACE).

    python3 scripts/trace_timeline.py TRACE.json OUT.png [--title TEXT]

One lane per thread of each rank (the driver first), a bar per span,
coloured by what ran: callbacks, waits for messages or workers, MPI moving
messages, out-of-core stores and loads. Collective calls are drawn as thin
bars above each rank's lanes. Needs matplotlib (Debian: python3-matplotlib);
it is optional, nothing else in blk uses it. For a closer look, open the
trace itself in https://ui.perfetto.dev or chrome://tracing.
"""
import argparse
import json
import sys

COLOURS = {
    "callback": "#4c72b0",
    "wait": "#dddddd",
    "mpi": "#dd8452",
    "out-of-core": "#55a868",
    "operation": "#8172b3",
}
LABELS = {
    "callback": "callback",
    "wait": "waiting (messages, workers)",
    "mpi": "MPI moving messages",
    "out-of-core": "out-of-core store / load",
    "operation": "collective call",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("png")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        sys.exit("trace_timeline.py needs matplotlib (apt-get install python3-matplotlib)")

    with open(args.trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    spans = [e for e in events if e.get("ph") == "X"]
    if not spans:
        sys.exit(f"{args.trace}: no spans")

    # Lanes: per rank, an operations lane, then its threads in tid order.
    lanes, labels = {}, []
    for pid in sorted({e["pid"] for e in spans}):
        lanes[(pid, "ops")] = len(labels)
        labels.append(f"rank {pid}: calls")
        for tid in sorted({e["tid"] for e in spans if e["pid"] == pid}):
            lanes[(pid, tid)] = len(labels)
            labels.append(f"rank {pid}: {names.get((pid, tid), f'thread {tid}')}")

    end = max(e["ts"] + e["dur"] for e in spans)
    unit, scale = ("ms", 1e-3) if end > 2000 else ("us", 1.0)
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(labels) + 1.4))
    for e in spans:
        cat = e.get("cat", "")
        if cat == "operation":
            y, h = lanes[(e["pid"], "ops")], 0.5
        else:
            y, h = lanes[(e["pid"], e["tid"])], 0.8
        ax.broken_barh([(e["ts"] * scale, max(e["dur"] * scale, end * scale / 4000))],
                       (y - h / 2, h), facecolors=COLOURS.get(cat, "#999999"),
                       edgecolor="none")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since the master was created ({unit})")
    ax.set_xlim(0, end * scale * 1.01)
    used = [c for c in COLOURS if any(e.get("cat") == c for e in spans)]
    ax.legend(handles=[Patch(color=COLOURS[c], label=LABELS[c]) for c in used],
              loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.25 / len(labels)),
              ncol=len(used), frameon=False)
    ax.set_title(args.title or args.trace)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)
    print(f"trace_timeline.py: {len(spans)} spans on {len(labels)} lanes -> {args.png}")


if __name__ == "__main__":
    main()
