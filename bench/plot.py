#!/usr/bin/env python3
"""Plot bench/table.sh's OUT file as an SVG (no plotting library needed).

    python3 bench/plot.py table.tsv docs/benchmarks-table.svg

Left: raftset / anchor per row (throughput; for rss rows, memory, where
lower is better), one bar per raft-log-store, with the 1.0 line. Right:
p99 latency of SADD -P1 at half of raftset's peak rate, raftset beside
redis-server at the same offered rate.
"""
import sys
from html import escape

COLORS = {"-": "#4c72b0", "bolt": "#dd8452", "wal": "#55a868", "default": "#4c72b0"}


def read(path):
    ratios, lat, load = [], [], ""
    for line in open(path):
        if line.startswith("#"):
            load = line.strip("# \n")
            continue
        f = line.rstrip("\n").split("\t")
        if len(f) < 5:
            continue
        if "lat-" in f[0]:
            p99 = lambda s: float(s.split("/")[1])
            lat.append((f[0], f[1], p99(f[2]), p99(f[3])))
        else:
            ratios.append((f[0], f[1], float(f[4])))
    return ratios, lat, load


def svg(ratios, lat, load):
    bar, gap, left, width = 14, 8, 230, 330
    rows = len(ratios)
    h1 = rows * (bar + 2) + gap * len({r[0] for r in ratios}) + 60
    h2 = len(lat) * 2 * (bar + 2) + gap * len(lat) + 60
    height = max(h1, h2) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 520}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">raftset / redis-server, medians of the runs '
           f'({escape(load)})</text>']
    top = 40
    vmax = max([r[2] for r in ratios] + [1.2])
    scale = width / vmax
    x1 = left + scale
    out.append(f'<line x1="{x1}" y1="{top - 5}" x2="{x1}" y2="{h1}" stroke="black" stroke-dasharray="4,3"/>')
    out.append(f'<text x="{x1 + 3}" y="{top - 8}">1.0 (redis)</text>')
    y, prev = top, None
    for name, store, r in ratios:
        if name != prev and prev is not None:
            y += gap
        label = name if name != prev else ""
        prev = name
        out.append(f'<text x="{left - 6}" y="{y + bar - 3}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{r * scale:.1f}" height="{bar}" fill="{COLORS.get(store, "#888")}"/>')
        out.append(f'<text x="{left + r * scale + 4:.1f}" y="{y + bar - 3}">{r:.2f}'
                   f'{"" if store == "-" else " " + escape(store)}</text>')
        y += bar + 2
    # Latency panel.
    lx, lw = left + width + 150, 230
    out.append(f'<text x="{lx - 140}" y="{top - 8}" font-weight="bold">p99 of SADD -P1 at 50% of peak (ms)</text>')
    lmax = max([max(a, b) for _, _, a, b in lat] + [1])
    y = top
    for name, store, a, b in lat:
        out.append(f'<text x="{lx - 6}" y="{y + bar - 3}" text-anchor="end">{escape(name)} {escape(store)}</text>')
        for who, v, color in (("raftset", a, COLORS.get(store, "#888")), ("redis", b, "#999")):
            w = v / lmax * lw
            out.append(f'<rect x="{lx}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}"/>')
            out.append(f'<text x="{lx + w + 4:.1f}" y="{y + bar - 3}">{who} {v / 1000:.1f}</text>')
            y += bar + 2
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py TABLE.tsv OUT.svg")
    ratios, lat, load = read(sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write(svg(ratios, lat, load))


if __name__ == "__main__":
    main()
