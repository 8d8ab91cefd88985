"""Renders bench/failover-plot.sh's scrape (CSV) as one PNG of four panels."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, dst, kill_at, restart_at = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
series = defaultdict(list)  # (node, metric, labels) -> [(t, v)]
with open(src) as f:
    for row in csv.DictReader(f):
        if row["metric"] == "event":
            continue
        series[(row["node"], row["metric"], row["labels"])].append((float(row["t"]), float(row["value"])))


def gaps(points, most=0.6):
    """Breaks the line where a node was not scraped (it was down)."""
    out = []
    for i, (t, v) in enumerate(points):
        if i and t - points[i - 1][0] > most:
            out.append((t - 0.01, float("nan")))
        out.append((t, v))
    return out


def rate(points):
    out = []
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t1 > t0 and v1 >= v0:
            out.append((t1, (v1 - v0) / (t1 - t0)))
    return gaps(out)


fig, axes = plt.subplots(4, 1, figsize=(10, 12), sharex=True)
nodes = sorted({k[0] for k in series})

ax = axes[0]
for n in nodes:
    for key in [(n, "raftset_commands_total", "cmd=sadd"), (n, "raftset_forwarded_write_ops_total", "")]:
        pts = rate(series.get(key, []))
        if pts and max(v for _, v in pts) > 0:
            label = ("SADD/s run by " if key[1] == "raftset_commands_total" else "writes/s forwarded by ") + n
            ax.plot(*zip(*pts), label=label)
ax.set_ylabel("ops/s")
ax.set_title("Write throughput (rate of raftset_commands_total{cmd=\"sadd\"}, raftset_forwarded_write_ops_total)")

ax = axes[1]
for n in nodes:
    pts = gaps(series.get((n, "raftset_raft_applied_index", ""), []))
    if pts:
        ax.plot(*zip(*pts), label="applied index " + n)
ax.set_ylabel("log index")
ax.set_title("raftset_raft_applied_index")

ax = axes[2]
for n in nodes:
    pts = gaps(series.get((n, "raftset_raft_term", ""), []))
    if pts:
        ax.step(*zip(*pts), where="post", label="term " + n)
    lead = gaps(series.get((n, "raftset_raft_is_leader", ""), []))
    if lead:
        ax.fill_between([t for t, _ in lead], 0, [v for _, v in lead], step="post", alpha=0.15, label="leader: " + n)
ax.set_ylabel("term / leader")
ax.set_title("raftset_raft_term and raftset_raft_is_leader (shaded)")

ax = axes[3]
for (n, m, labels), pts in sorted(series.items()):
    if m == "raftset_raft_follower_lag_entries":
        ax.plot(*zip(*gaps(pts)), label="lag of %s seen by %s" % (labels.replace("peer=", ""), n))
ax.set_yscale("symlog")
ax.set_ylabel("entries")
ax.set_title("raftset_raft_follower_lag_entries (on the leader)")
ax.set_xlabel("seconds")

for ax in axes:
    ax.axvline(kill_at, color="red", linestyle="--", linewidth=1)
    ax.axvline(restart_at, color="green", linestyle="--", linewidth=1)
    ax.legend(fontsize=7, loc="upper left")
axes[0].text(kill_at, axes[0].get_ylim()[1] * 0.9, " leader killed -9", color="red", fontsize=8)
axes[0].text(restart_at, axes[0].get_ylim()[1] * 0.9, " restarted", color="green", fontsize=8)
fig.tight_layout()
fig.savefig(dst, dpi=80)
