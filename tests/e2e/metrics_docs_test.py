"""docs/metrics.md's "Useful queries", evaluated (CTest e2e_metrics_docs): a renamed metric or label,
or a query that does not compute what its comment says, fails here.

  1. The queries and their comments are read from metrics.md's indented block; the metric
     families, their labels, the documented label values and the histogram buckets from its tables.
     Every metric a query selects must be a documented family (or a _bucket / _sum / _count of a
     documented histogram) and every label it matches or groups by one of that family's labels.
  2. A real groved serves examples/models; predict, explain and failing calls give it series, and
     its /metrics exposition is read. The input series of step 3 must be shaped like it: each
     sample name exported by groved with exactly groved's label names, each label value one groved
     exports or metrics.md documents (model and version names are free), bucket bounds groved's.
  3. `promtool test rules` evaluates every query on those input series (a known traffic: rates,
     latencies, errors, drops, batch sizes, readiness) and compares the result with the values
     SCENARIO below expects for that query's comment. A query without expected values, or expected
     values for a query the document no longer has, fails. promtool is first shown to fail on a
     wrong expectation, so that a passing run means the values were compared.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import groved_harness as h  # noqa: E402

INTERVAL = "15s"
EVAL_TIME = "10m"
STEPS = 60  # samples 0..15m


def counter(per_second):
    """A counter growing by `per_second` (in units per second) over the scenario."""
    return f"0+{per_second * 15:g}x{STEPS}"


def gauge(value):
    return f"{value:g}x{STEPS}"


def latency_buckets(doc_buckets, method, operation, bound, per_second):
    """grove_request_duration_seconds buckets: every request `per_second` takes at most `bound`
    seconds and more than the bucket below it."""
    out = []
    for le in doc_buckets + ["+Inf"]:
        inside = le == "+Inf" or float(le) >= bound
        out.append((f'grove_request_duration_seconds_bucket{{model="demo",method="{method}",'
                    f'operation="{operation}",le="{le}"}}', counter(per_second if inside else 0)))
    return out


def scenario(doc_buckets):
    """(input series, expected results by query comment). The traffic: model demo, 40 predict rows/s
    and 10 explain rows/s computed, 36 + 10 delivered; Predict 2 calls/s of which 0.2/s
    INVALID_ARGUMENT, all answered within (0.5 ms, 1 ms]; Explain 1 call/s within (50 ms, 100 ms];
    ListModels (model "") 1 call/s; drops 1/s queue_full + 2/s expected_wait + 0 memory (admission)
    and 10/s deadline_exceeded (later); batches of 64 predict and 16 explain rows; version 1 ready,
    version 2 not."""
    series = [
        ('grove_rows_total{model="demo",operation="predict"}', counter(40)),
        ('grove_rows_total{model="demo",operation="explain"}', counter(10)),
        ('grove_delivered_rows_total{model="demo",operation="predict"}', counter(36)),
        ('grove_delivered_rows_total{model="demo",operation="explain"}', counter(10)),
        ('grove_requests_total{model="demo",method="Predict",code="OK"}', counter(1.8)),
        ('grove_requests_total{model="demo",method="Predict",code="INVALID_ARGUMENT"}', counter(0.2)),
        ('grove_requests_total{model="demo",method="Explain",code="OK"}', counter(1)),
        ('grove_requests_total{model="",method="ListModels",code="OK"}', counter(1)),
        ('grove_dropped_tasks_total{model="demo",operation="predict",reason="queue_full"}', counter(1)),
        ('grove_dropped_tasks_total{model="demo",operation="predict",reason="expected_wait"}', counter(2)),
        ('grove_dropped_tasks_total{model="demo",operation="predict",reason="memory"}', counter(0)),
        ('grove_dropped_tasks_total{model="demo",operation="predict",reason="deadline_exceeded"}', counter(10)),
        ('grove_batch_size_rows_sum{model="demo",operation="predict"}', counter(64)),
        ('grove_batch_size_rows_count{model="demo",operation="predict"}', counter(1)),
        ('grove_batch_size_rows_sum{model="demo",operation="explain"}', counter(16)),
        ('grove_batch_size_rows_count{model="demo",operation="explain"}', counter(1)),
        ('grove_model_ready{model="demo",version="1"}', gauge(1)),
        ('grove_model_ready{model="demo",version="2"}', gauge(0)),
    ]
    series += latency_buckets(doc_buckets, "Predict", "predict", 0.001, 2)
    series += latency_buckets(doc_buckets, "Explain", "explain", 0.1, 1)
    # histogram_quantile interpolates inside the bucket (0.0005, 0.001] holding every call.
    p99 = 0.0005 + (0.001 - 0.0005) * 0.99
    expected = {
        "rows per second per model and operation": [
            ('{model="demo",operation="predict"}', 40), ('{model="demo",operation="explain"}', 10)],
        "p99 end-to-end latency of Predict per model": [('{model="demo"}', p99)],
        "error ratio": [('{model="demo"}', 0.2 / 3)],  # model "" has no errors: no ratio
        "overload: requests refused at admission": [('{model="demo",operation="predict"}', 3)],
        "goodput against work that reached nobody": [('{model="demo"}', 46 / 50)],
        "mean batch size": [('{model="demo"}', 40)],
        "models not ready": [('grove_model_ready{model="demo",version="2"}', 0)],
    }
    return series, expected


# ---------------------------------------------------------------------------------------------------
# metrics.md

def section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else len(text)]


def doc_queries(text):
    """[(comment, query)] of the indented block under "## Useful queries"."""
    out, comment = [], None
    for line in section(text, "## Useful queries").splitlines():
        if not line.startswith("    "):
            continue
        line = line.strip()
        if line.startswith("#"):
            comment = line.lstrip("#").strip()
        elif line:
            out.append((comment, line))
            comment = None
    return out


def doc_families(text):
    """{family: (type, [labels])} from the metric tables."""
    out = {}
    for m in re.finditer(r"^\| `(grove_\w+)` \| (\w+) \| ([^|]*) \|", text, re.M):
        out[m.group(1)] = (m.group(2), re.findall(r"`(\w+)`", m.group(3)))
    return out


def doc_label_values(text):
    """{label: {documented values}} from the "Label values" table."""
    out = {}
    for m in re.finditer(r"^\| `(\w+)` \| (.*) \|$", section(text, "## Label values"), re.M):
        out[m.group(1)] = set(re.findall(r"`([^`]*)`", m.group(2)))
    return out


def doc_latency_buckets(text):
    block = section(text, "## Latency buckets")
    line = next(l for l in block.splitlines() if l.startswith("    0"))
    return [b.strip() for b in line.split(",")]


def selected(query):
    """[(metric, {label names used})] of a query: matchers and by/without clauses."""
    out = []
    groupings = set()
    for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", query):
        groupings |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    for m in re.finditer(r"\b(grove_\w+)(\{[^}]*\})?", query):
        labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", m.group(2) or ""))
        out.append((m.group(1), labels | groupings))
    return out


def family_of(name, families):
    if name in families:
        return name, families[name][1]
    for suffix, extra in (("_bucket", ["le"]), ("_sum", []), ("_count", [])):
        base = name[:-len(suffix)] if name.endswith(suffix) else None
        if base in families and families[base][0] == "histogram":
            return base, families[base][1] + extra
    return None, []


# ---------------------------------------------------------------------------------------------------
# groved's exposition

def parse_exposition(text):
    """{sample name: [ {label: value} ]}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"(\w+)(?:\{(.*)\})?\s+\S+", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out.setdefault(m.group(1), []).append(labels)
    return out


def parse_series(selector):
    m = re.match(r"(\w+)\{(.*)\}$", selector)
    return m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))


def live_exposition(args, f):
    """groved on examples/models after predict, explain and failing calls: its /metrics."""
    rows = os.path.join(args.source_dir, "examples", "rows.csv")
    with h.Groved(args.groved, os.path.join(args.source_dir, "examples", "models")) as server:
        for command in (["predict"], ["predict", "--kind", "margin"], ["explain"]):
            r = subprocess.run([args.grove] + command + ["--server", server.target, "--model", "demo",
                                                         "--input", rows, "--no-progress"],
                               capture_output=True, text=True, timeout=120)
            f.check(r.returncode == 0, f"grove {' '.join(command)} --server failed: {r.stderr}")
        for model in ("demo-typo",):  # NOT_FOUND under model="_unknown"
            subprocess.run([args.grove, "predict", "--server", server.target, "--model", model,
                            "--input", rows, "--no-progress"], capture_output=True, timeout=120)
        url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()


def check_shape(f, series, live, documented_values, buckets):
    """Each input series as groved exports it: name, label names, label values."""
    for selector, _ in series:
        name, labels = parse_series(selector)
        samples = live.get(name)
        if not f.check(bool(samples), f"{name}: groved does not export it (input series {selector})"):
            continue
        names = {frozenset(s) for s in samples}
        f.check(names == {frozenset(labels)},
                f"{selector}: labels {sorted(labels)}, groved's {[sorted(n) for n in names]}")
        for label, value in labels.items():
            if label in ("model", "version"):
                continue  # free-form names
            exported = {s.get(label) for s in samples}
            allowed = exported | documented_values.get(label, set())
            if label == "le":
                allowed = exported
                f.check(set(buckets + ["+Inf"]) == exported,
                        f"{name}: groved's buckets {sorted(exported)} are not metrics.md's {buckets}")
            f.check(value in allowed, f"{selector}: {label}={value!r} is neither exported by groved "
                                      f"nor documented ({sorted(allowed)})")


# ---------------------------------------------------------------------------------------------------
# promtool

def rule_test(series, queries, expected, eval_time=EVAL_TIME):
    """promtool's unit test file (YAML, written by hand: JSON is YAML)."""
    import json  # noqa: PLC0415
    tests = []
    for comment, query in queries:
        tests.append({"expr": query, "eval_time": eval_time,
                      "exp_samples": [{"labels": labels, "value": float(value)}
                                      for labels, value in expected[comment]]})
    doc = {"rule_files": [], "evaluation_interval": INTERVAL,
           "tests": [{"interval": INTERVAL,
                      "input_series": [{"series": s, "values": v} for s, v in series],
                      "promql_expr_test": tests}]}
    return json.dumps(doc, indent=1)


def promtool(promtool_bin, work, name, content):
    path = os.path.join(work, name)
    with open(path, "w") as out:
        out.write(content)
    return subprocess.run([promtool_bin, "test", "rules", path], capture_output=True, text=True,
                          timeout=120)


def main():
    args = h.parse_args()
    promtool_bin = shutil.which("promtool")
    if not promtool_bin:
        h.skip("promtool not installed (Debian package prometheus)")
    f = h.Failures()
    text = open(os.path.join(args.source_dir, "docs", "metrics.md")).read()
    queries = doc_queries(text)
    families = doc_families(text)
    documented_values = doc_label_values(text)
    buckets = doc_latency_buckets(text)
    f.check(len(queries) >= 7, f"metrics.md's useful queries: {queries}")
    print(f"metrics.md: {len(queries)} queries, {len(families)} families, buckets {buckets}")

    # 1. Every selected metric and label is documented.
    for comment, query in queries:
        f.check(bool(comment), f"query without a comment line: {query}")
        for metric, labels in selected(query):
            family, family_labels = family_of(metric, families)
            if f.check(family is not None, f"`{query}`: {metric} is not a metric metrics.md documents"):
                f.check(labels <= set(family_labels),
                        f"`{query}`: labels {sorted(labels - set(family_labels))} are not {family}'s")

    # 2. The input series are shaped as groved exports them.
    series, expected = scenario(buckets)
    live = parse_exposition(live_exposition(args, f))
    check_shape(f, series, live, documented_values, buckets)

    # 3. promtool evaluates each query; the values must be the expected ones.
    comments = [c for c, _ in queries]
    for c in comments:
        f.check(c in expected, f"metrics.md's query {c!r} has no expected values in this test: add them")
    for c in expected:
        f.check(c in comments, f"expected values for {c!r}, a query metrics.md no longer has")
    runnable = [(c, q) for c, q in queries if c in expected]
    work = tempfile.mkdtemp(prefix="grove_metrics_docs_")
    try:
        # A wrong expectation must fail (promtool compares values, and this test reads its verdict).
        wrong = {c: [(labels, value + 1) for labels, value in samples] for c, samples in expected.items()}
        r = promtool(promtool_bin, work, "wrong.yml", rule_test(series, runnable[:1], wrong))
        f.check(r.returncode != 0 and "exp:" in r.stdout + r.stderr and "got:" in r.stdout + r.stderr,
                f"promtool accepted a wrong expectation:\n{r.stdout}{r.stderr}")
        r = promtool(promtool_bin, work, "queries.yml", rule_test(series, runnable, expected))
        f.check(r.returncode == 0, f"promtool test rules on metrics.md's queries:\n{r.stdout}{r.stderr}")
        if r.returncode == 0:
            print(f"promtool: {len(runnable)} queries of metrics.md give the expected values")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    f.finish("metrics_docs")


if __name__ == "__main__":
    sys.exit(main())
