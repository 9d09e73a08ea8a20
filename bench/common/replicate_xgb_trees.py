#!/usr/bin/env python3
"""Makes a large model for load benchmarks by repeating the trees of an existing one.

  python3 bench/common/replicate_xgb_trees.py IN.{json,ubj} N OUT_PREFIX
      writes OUT_PREFIX.json and OUT_PREFIX.ubj: the XGBoost model of IN with its trees repeated N
      times (the rounds repeated, as XGBoost saves them), a valid model XGBoost itself reloads.
  python3 bench/common/replicate_xgb_trees.py IN.txt N OUT_PREFIX
      writes OUT_PREFIX.txt: the LightGBM text model IN with its trees repeated N times (renumbered;
      the optional tree_sizes line dropped).

Used for the 3-million-leaf load figures in docs/benchmarks/model-load.md (adult-large x 7 =
3,145,079 leaves) while cal_housing-large is not shipped in /work/shared/bench-models.
"""
import json
import re
import sys


def lightgbm(src, copies, out):
    text = open(src).read()
    begin, end = text.index("Tree=0\n"), text.index("end of trees")
    header = "".join(l for l in text[:begin].splitlines(True) if not l.startswith("tree_sizes="))
    trees = re.split(r"^Tree=\d+\n", text[begin:end], flags=re.M)[1:]
    with open(out + ".txt", "w") as f:
        f.write(header)
        for i in range(copies * len(trees)):
            f.write("Tree=%d\n%s" % (i, trees[i % len(trees)]))
        f.write(text[end:])
    print(f"{out}.txt: {copies * len(trees)} trees")


def main():
    src, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if src.endswith(".txt"):
        lightgbm(src, copies, out)
        return
    import xgboost as xgb  # only needed for XGBoost models
    model = json.loads(xgb.Booster(model_file=src).save_raw("json"))
    gbm = model["learner"]["gradient_booster"]["model"]
    trees = gbm["trees"]
    n = len(trees)
    new = []
    for r in range(copies):
        for i, tree in enumerate(trees):
            t = dict(tree)
            t["id"] = r * n + i
            new.append(t)
    gbm["trees"] = new
    gbm["tree_info"] = gbm["tree_info"] * copies
    if "iteration_indptr" in gbm:
        indptr = gbm["iteration_indptr"]
        gbm["iteration_indptr"] = indptr + [r * n + p for r in range(1, copies) for p in indptr[1:]]
    gbm["gbtree_model_param"]["num_trees"] = str(len(new))
    with open(out + ".json", "w") as f:
        json.dump(model, f, separators=(",", ":"))
    booster = xgb.Booster(model_file=out + ".json")
    booster.save_model(out + ".ubj")
    print(f"{out}.json/.ubj: {len(new)} trees, {booster.num_boosted_rounds()} rounds")


if __name__ == "__main__":
    main()
