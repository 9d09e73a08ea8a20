#!/usr/bin/env python3
"""Side-by-side table of bench/nvforest_compare.sh's outputs: per model and batch, nvForest's and
Grove's engine-level and end-to-end times, the ratio (nvForest time / Grove time: above 1 Grove is
faster), Grove's strategy and its time against the floor (grove_predict_bench's FLOOR line), and
Grove's end-to-end rate in GB/s of rows and outputs moved, with its share of the link floor (rows
in at the pinned host-to-device rate, outputs out at the device-to-host rate, overlapped; the
bench's LINK line).

  python3 bench/common/compare_table.py OUT_DIR
"""
import glob
import os
import sys


def batch_rows(text):
    text = text.strip()
    if text.endswith("M"):
        return int(text[:-1]) * 1000000
    if text.endswith("K"):
        return int(text[:-1]) * 1000
    return int(text)


def parse_nvf(path):
    res = {}
    for line in open(path):
        f = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(f) == 9 and f[1].isdigit():
            res[int(f[1])] = (float(f[5]), float(f[7]), f"{f[2]}/{f[3]}")
    return res


def parse_grove(path):
    eng, e2e, strat, floor, every = {}, {}, {}, {}, {}
    link = None
    for line in open(path):
        f = [x.strip() for x in line.split("|")]
        if line.startswith("LINK") and len(f) >= 5:
            link = tuple(float(x.split()[1]) for x in f[1:5])  # in B, out B, h2d GB/s, d2h GB/s
        elif line.startswith("FLOOR") and len(f) >= 5:
            floor[batch_rows(f[1])] = float(f[3].split()[1])
        elif len(f) == 10 and f[1] == "tahoe":
            n = batch_rows(f[2])
            if f[3].startswith("auto("):
                eng[n], e2e[n] = float(f[4]), float(f[7])
                strat[n] = f[3][5:-1].split("/")[0]
            elif float(f[4]) > 0:
                every.setdefault(n, []).append((float(f[4]), f[3]))
    return eng, e2e, strat, floor, every, link


def main():
    out = sys.argv[1]
    print("| model | rows | nvForest engine ms | Grove engine ms | engine ratio | Grove strategy | "
          "Grove % of floor | best Grove strategy (ms) | nvForest e2e ms | Grove e2e ms | e2e ratio | "
          "Grove e2e GB/s (% of link) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for nvf in sorted(glob.glob(os.path.join(out, "*.nvf.txt"))):
        name = os.path.basename(nvf)[: -len(".nvf.txt")]
        gpath = os.path.join(out, name + ".grove.txt")
        if not os.path.exists(gpath):
            continue
        n_res = parse_nvf(nvf)
        eng, e2e, strat, floor, every, link = parse_grove(gpath)
        for n in sorted(n_res):
            ne, n2, _ = n_res[n]
            ge, g2 = eng.get(n, -1), e2e.get(n, -1)
            ratio = f"{ne / ge:.2f}x" if ge > 0 else "-"
            ratio2 = f"{n2 / g2:.2f}x" if g2 > 0 else "-"
            fl = f"{100 * floor[n] / ge:.0f}%" if ge > 0 and n in floor else "-"
            best = min(every.get(n, [(-1, "-")]))
            gbps = "-"
            if link is not None and g2 > 0:
                moved = n * (link[0] + link[1])
                floor_s = max(n * link[0] / (link[2] * 1e9), n * link[1] / (link[3] * 1e9))
                gbps = f"{moved / (g2 / 1e3) / 1e9:.1f} ({100 * floor_s / (g2 / 1e3):.0f}%)"
            print(f"| {name} | {n:,} | {ne:.3f} | {ge:.3f} | {ratio} | {strat.get(n, '-')} | {fl} | "
                  f"{best[1]} ({best[0]:.3f}) | {n2:.3f} | {g2:.3f} | {ratio2} | {gbps} |")


if __name__ == "__main__":
    main()
