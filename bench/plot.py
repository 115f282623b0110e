#!/usr/bin/python3
"""Plot bench/perf.sh's summary (bench/build/perf.csv) as a PNG.

    /usr/bin/python3 bench/plot.py bench/build/perf.csv bench/build/perf.png [subtitle]

Three panels: half-round-trip latency against message size, bandwidth
against message size, and the 8-byte message rate; one line (or bar) per
transport, the median of the runs with min-max error bars.  The raw UDP
socket results appear as a dashed line (latency) and as a horizontal
reference line (the median goodput of the 1472-byte datagram stream).

Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TRANSPORTS = [  # key, legend, colour, line style
    ("usnic", "usnic BTL (default wire: socket)", "tab:red", "-"),
    ("usnic_gso", "usnic BTL, socket wire, 1472 B datagrams", "tab:orange", "-"),
    ("usnic_ofi", "usnic BTL, ofi wire", "tab:brown", "-"),
    ("tcp", "btl/tcp", "tab:blue", "-"),
    ("rxd", "mtl ofi, udp;ofi_rxd", "tab:green", "-"),
    ("vader", "btl/vader (shared memory)", "tab:gray", "-"),
    ("udp", "UDP socket ping-pong (udp_raw)", "black", "--"),
    ("fipp", "fi_pingpong udp dgram", "tab:purple", ":"),
]
N_MPI = 6  # the first N_MPI entries are MPI transports (bandwidth, rate)
SHORT = {"usnic": "usnic (socket)", "usnic_gso": "usnic socket 1472 B", "usnic_ofi": "usnic ofi"}
LAT_SIZES = [0, 8, 1024, 1472, 16384]
BW_SIZES = [65536, 1048576, 4194304]


def human(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return "%d MiB" % (size >> 20)
    if size >= 1024 and size % 1024 == 0:
        return "%d KiB" % (size >> 10)
    return "%d B" % size


def load(path):
    cells = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["transport"], row["metric"], int(float(row["size"])))
            cells[key] = (float(row["median"]), float(row["min"]), float(row["max"]))
    return cells


def series(cells, transport, metric, sizes, shift=0.0):
    xs, ys, lo, hi = [], [], [], []
    for i, size in enumerate(sizes):
        cell = cells.get((transport, metric, size))
        if cell is None:
            continue
        med, mn, mx = cell
        xs.append(i + shift)
        ys.append(med)
        lo.append(med - mn)
        hi.append(mx - med)
    return xs, ys, [lo, hi]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    cells = load(sys.argv[1])
    subtitle = sys.argv[3] if len(sys.argv) == 4 else ""

    fig, (ax_lat, ax_bw, ax_rate) = plt.subplots(
        1, 3, figsize=(16, 6.2), gridspec_kw={"width_ratios": [1.25, 1.0, 0.8]})

    # Latency (each transport shifted a little sideways so that the error
    # bars do not hide each other)
    for n, (key, name, colour, style) in enumerate(TRANSPORTS):
        xs, ys, err = series(cells, key, "lat", LAT_SIZES, 0.04 * (n - 3.5))
        if xs:
            ax_lat.errorbar(xs, ys, yerr=err, label=name, color=colour, linestyle=style,
                            marker="o", markersize=4, capsize=3, linewidth=1.6)
    ax_lat.set_xticks(range(len(LAT_SIZES)))
    ax_lat.set_xticklabels([human(s) for s in LAT_SIZES])
    ax_lat.set_yscale("log")
    ax_lat.set_xlabel("message size")
    ax_lat.set_ylabel("half round trip, µs (lower is better)")
    ax_lat.set_title("Ping-pong latency")
    ax_lat.grid(True, which="both", alpha=0.3)

    # Bandwidth
    for n, (key, name, colour, style) in enumerate(TRANSPORTS[:N_MPI]):
        xs, ys, err = series(cells, key, "bw", BW_SIZES, 0.04 * (n - 2.5))
        if xs:
            ax_bw.errorbar(xs, ys, yerr=err, label=name, color=colour, linestyle=style,
                           marker="o", markersize=4, capsize=3, linewidth=1.6)
    stream = cells.get(("udp", "bw", 1472))
    if stream is not None:
        ax_bw.axhline(stream[0], color="black", linestyle="--", linewidth=1.2,
                      label="UDP socket stream, 1472 B datagrams")
    ax_bw.set_xticks(range(len(BW_SIZES)))
    ax_bw.set_xticklabels([human(s) for s in BW_SIZES])
    ax_bw.set_xlim(-0.3, len(BW_SIZES) - 0.7)
    ax_bw.set_yscale("log")
    ax_bw.set_xlabel("message size (window of non-blocking sends)")
    ax_bw.set_ylabel("MB/s, 10^6 B/s (higher is better)")
    ax_bw.set_title("Windowed bandwidth")
    ax_bw.grid(True, which="both", alpha=0.3)

    # Message rate
    names, vals, errs, colours = [], [], [[], []], []
    for key, name, colour, _ in TRANSPORTS[:N_MPI]:
        cell = cells.get((key, "rate", 8))
        if cell is None:
            continue
        med, mn, mx = cell
        names.append(SHORT.get(key, name.split(" (")[0].replace("mtl ofi, ", "")))
        vals.append(med / 1e3)
        errs[0].append((med - mn) / 1e3)
        errs[1].append((mx - med) / 1e3)
        colours.append(colour)
    if vals:
        bars = ax_rate.bar(range(len(vals)), vals, yerr=errs, color=colours, capsize=4)
        for bar, v in zip(bars, vals):
            ax_rate.annotate("%.0fk" % v, (bar.get_x() + bar.get_width() / 2, v),
                             xytext=(4, 3), textcoords="offset points", ha="left",
                             fontsize=8)
        ax_rate.set_xticks(range(len(vals)))
        ax_rate.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
        ax_rate.set_yscale("log")
        ax_rate.set_ylim(top=max(v + e for v, e in zip(vals, errs[1])) * 2.5)
    ax_rate.set_ylabel("thousand messages/s (higher is better)")
    ax_rate.set_title("8-byte message rate (window 64)")
    ax_rate.grid(True, axis="y", which="both", alpha=0.3)

    fig.suptitle("usnic BTL and its peers, 2 ranks on one host over loopback; "
                 "median of the runs, bars min-max" + (" — " + subtitle if subtitle else ""))
    # One legend for all panels, below them: every line of the latency
    # panel plus the stream reference of the bandwidth panel.
    handles, labels = ax_lat.get_legend_handles_labels()
    for h, label in zip(*ax_bw.get_legend_handles_labels()):
        if label not in labels:
            handles.append(h)
            labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
