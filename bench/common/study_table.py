#!/usr/bin/env python3
"""Turns `grove_predict_bench --mode study` outputs into the selector-study tables of
docs/benchmarks/archive.md ("Selector study").

  python3 bench/common/study_table.py STUDY.txt...

prints the summary (how often the selector chose the measured best, at engine level and end to end)
and one markdown row per model and batch: engine ms / e2e ms of every strategy (`-`: infeasible or
skipped), the CPU path (e2e), and the selector's pick with its slowdown against the measured best.
"""
import re
import sys

SHORT = {"direct": "dir", "shared_data": "sd", "shared_forest": "sf",
         "splitting_shared_forest": "ssf", "cpu": "cpu"}
GPU = ["direct", "shared_data", "shared_forest", "splitting_shared_forest"]


def fmt(v):
    return "-" if v < 0 else "%.0f" % v if v >= 1000 else "%.3g" % v


def main():
    times = {}    # (model, batch) -> strategy -> (engine_ms, e2e_ms)
    choices = {}  # (model, batch, level) -> (chosen, slowdown, chose the best)
    order = []
    for path in sys.argv[1:]:
        for line in open(path):
            f = [x.strip() for x in line.split("|")]
            if line.startswith("CHOICE"):
                key = (f[0].split(None, 1)[1], f[1], f[2])
                chosen = re.match(r"chose (\S+)", f[3]).group(1)
                best = re.match(r"best (\S+)", f[4]).group(1)
                choices[key] = (chosen, float(f[5].rstrip("x")), chosen == best)
            elif len(f) == 10 and f[1] == "tahoe" and not f[3].startswith("auto"):
                key = (f[0], f[2])
                if key not in times:
                    times[key] = {}
                    order.append(key)
                times[key][f[3]] = (float(f[4]), float(f[7]))
    for level in ("engine", "e2e"):
        picks = [choices[k] for k in choices if k[2] == level]
        if not picks:
            continue
        slow = [s for _, s, _ in picks]
        wrong = [s for _, s, best in picks if not best]
        print(f"{level}: best in {len(slow) - len(wrong)} of {len(slow)}, within 10% in "
              f"{sum(s <= 1.1 for s in slow)} of {len(slow)}, mean slowdown when not "
              f"{sum(wrong) / len(wrong) if wrong else 1:.2f}x, worst {max(slow):.2f}x")
    print()
    print("| model | batch | direct | shared_data | shared_forest | splitting | cpu (e2e) "
          "| selector (engine) | selector (e2e) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, batch in order:
        t = times[(model, batch)]
        cells = [f"{fmt(t[s][0])} / {fmt(t[s][1])}" if s in t else "- / -" for s in GPU]
        cpu = fmt(t["cpu"][1]) if "cpu" in t else "-"
        sel = []
        for level in ("engine", "e2e"):
            c = choices.get((model, batch, level))
            sel.append(f"{SHORT.get(c[0], c[0])} {c[1]:.2f}x" if c else "-")
        print(f"| {model} | {batch} | " + " | ".join(cells) + f" | {cpu} | {sel[0]} | {sel[1]} |")


if __name__ == "__main__":
    main()
