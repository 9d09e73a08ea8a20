#!/usr/bin/env python3
"""Checks of deploy/ that need no running groved (each a CTest test, label `deploy`):

  check_static.py manifests   kubectl kustomize renders both overlays (and the baked-models
                              component); yamllint passes on deploy/ and on the rendered output;
                              ports, probes (and docs/operations.md's probe example), drain timing,
                              selectors, GPU settings and docs/deploy.md's scrape job are consistent
  check_static.py rules       promtool check rules, promtool test rules, PrometheusRule in sync
  check_static.py dashboard   grove.json in sync with its generator, importable structure, and every
                              metric/label it (and the rules and adapter) queries is documented
  check_static.py dockerfile  the Dockerfile runs README's steps (scripts/install-deps.sh,
                              scripts/build.sh <preset>), its ports/env match the entry point,
                              docs/operations.md and the manifests
  check_static.py kserve      deploy/kserve's ClusterServingRuntime and InferenceServices validate
                              against KServe's CRD schemas (vendored: data/kserve-crd-schemas.json.gz),
                              unknown fields included; the runtime's env names entry point variables,
                              the InferenceServices name the runtime and formats it supports, and
                              docs/deploy.md shows the files
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_lib as d  # noqa: E402

# Triton's ports, which groved defaults to: REST, gRPC, Prometheus.
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002


# ---------------------------------------------------------------------------------------------------
def check_manifests(f):
    kubectl, yamllint = d.tool("kubectl", "KUBECTL"), d.tool("yamllint", "YAMLLINT")
    if not kubectl or not yamllint:
        d.skip("kubectl or yamllint not installed (scripts/install-deps.sh installs them)")
    lint_cfg = os.path.join(d.DEPLOY, ".yamllint.yaml")
    out = subprocess.run([yamllint, "-c", lint_cfg, "-f", "parsable", d.DEPLOY], capture_output=True, text=True)
    f.check(out.returncode == 0, f"yamllint deploy/:\n{out.stdout}{out.stderr}")

    table = d.entrypoint_table()
    for overlay in d.OVERLAYS:
        path = os.path.join(d.DEPLOY, "k8s", "overlays", overlay)
        try:
            text, objs = d.kustomize(path)
        except RuntimeError as e:
            f.check(False, str(e))
            continue
        out = subprocess.run([yamllint, "-c", lint_cfg, "-f", "parsable", "-"], input=text,
                             capture_output=True, text=True)
        f.check(out.returncode == 0, f"yamllint of rendered overlay {overlay}:\n{out.stdout}")
        check_overlay(f, overlay, objs, table)

    # The ServiceMonitor example scrapes the Service's named metrics port with job="grove".
    sm = d.yaml_load(os.path.join(d.DEPLOY, "k8s", "examples", "servicemonitor.yaml"))
    _, base = d.kustomize(os.path.join(d.DEPLOY, "k8s", "base"))
    svc = d.find(base, "Service", "grove")
    f.check(all(svc["metadata"]["labels"].get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items()),
            "examples/servicemonitor.yaml does not select the grove Service")
    f.check([e["port"] for e in sm["spec"]["endpoints"]] == ["metrics"]
            and "metrics" in [p["name"] for p in svc["spec"]["ports"]], "ServiceMonitor port is not the Service's metrics")
    f.check(svc["metadata"]["labels"].get(sm["spec"]["jobLabel"]) == "grove", "ServiceMonitor jobLabel does not give job=grove")

    # The baked-models example removes the models volume and its mount, nothing else.
    try:
        _, objs = d.kustomize(os.path.join(d.DEPLOY, "k8s", "examples", "gpu-baked-models"))
        pod = d.find(objs, "Deployment", "grove")["spec"]["template"]["spec"]
        mounts = [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]]
        f.check("/models" not in mounts and "/etc/grove" in mounts,
                f"gpu-baked-models: mounts should keep /etc/grove and drop /models: {mounts}")
        f.check(all(v["name"] != "models" for v in pod["volumes"]), "gpu-baked-models: models volume still there")
    except RuntimeError as e:
        f.check(False, str(e))

    # Only fields kustomize v2.0.3 knows: Debian 12's kubectl (kubernetes-client 1.20) embeds it.
    v2_fields = {"apiVersion", "kind", "namespace", "namePrefix", "nameSuffix", "commonLabels",
                 "commonAnnotations", "resources", "bases", "configMapGenerator", "secretGenerator",
                 "generatorOptions", "images", "patchesStrategicMerge", "patchesJson6902", "vars", "crds"}
    for dirpath, _, files in os.walk(os.path.join(d.DEPLOY, "k8s")):
        if "kustomization.yaml" in files:
            path = os.path.join(dirpath, "kustomization.yaml")
            k = d.yaml_load(path)
            extra = set(k) - v2_fields
            f.check(not extra, f"{os.path.relpath(path, d.ROOT)} uses {sorted(extra)}, unknown to kustomize v2.0.3 "
                               "(Debian 12's kubectl)")
            f.check(k.get("kind") == "Kustomization", f"{os.path.relpath(path, d.ROOT)} is not a Kustomization")
            for r in k.get("resources", []):
                f.check(os.path.isfile(os.path.join(dirpath, r)),
                        f"{os.path.relpath(path, d.ROOT)}: resource {r} is not a file (v2.0.3 needs `bases:` for directories)")


def doc_yaml(doc, heading):
    """The first ```yaml block of docs/<doc>'s section `heading`, parsed; None when there is none."""
    text = d.read(os.path.join(d.ROOT, "docs", doc))
    start = text.index(heading)
    m = re.search(r"```yaml\n(.*?)```", text[start:text.find("\n## ", start + 1)], re.S)
    return d.yaml_load_all(m.group(1))[0] if m else None


def check_overlay(f, overlay, objs, table):
    ctx = f"overlay {overlay}"
    dep = d.find(objs, "Deployment")
    if not f.check(dep is not None, f"{ctx}: no Deployment"):
        return
    name = dep["metadata"]["name"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    sel = dep["spec"]["selector"]["matchLabels"]
    f.check(all(pod_labels.get(k) == v for k, v in sel.items()), f"{ctx}: selector does not match pod labels")
    pod = dep["spec"]["template"]["spec"]
    c = next((c for c in pod["containers"] if c["name"] == "groved"), None)
    if not f.check(c is not None, f"{ctx}: no container named groved"):
        return
    env = d.container_env(c)
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    f.check(ports == {"http": HTTP_PORT, "grpc": GRPC_PORT, "metrics": METRICS_PORT},
            f"{ctx}: container ports {ports}, expected http {HTTP_PORT}, grpc {GRPC_PORT} and metrics "
            f"{METRICS_PORT}")
    f.check(env.get("GROVE_HTTP_PORT") == str(ports.get("http")), f"{ctx}: GROVE_HTTP_PORT != http containerPort")
    f.check(env.get("GROVE_GRPC_PORT") == str(ports.get("grpc")), f"{ctx}: GROVE_GRPC_PORT != grpc containerPort")
    f.check(env.get("GROVE_METRICS_PORT") == str(ports.get("metrics")),
            f"{ctx}: GROVE_METRICS_PORT != metrics containerPort")
    for var in env:
        if var.startswith("GROVE_"):
            f.check(var in table, f"{ctx}: env {var} is not a variable of the entry point")
    f.check(not c.get("command"), f"{ctx}: container must keep the image's entry point (no command:)")

    # Probes: native gRPC health on the gRPC container port; the startup probe covers loading.
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = c.get(kind)
        if not f.check(probe and "grpc" in probe, f"{ctx}: {kind} must be a native gRPC probe"):
            continue
        f.check(probe["grpc"]["port"] == ports.get("grpc"), f"{ctx}: {kind} port is not the grpc port")
    # docs/deploy.md's scrape job for Kubernetes without the operator (Debian's promtool has no
    # Kubernetes discovery to check it with): job grove, and its keep rules keep this pod's metrics port.
    jobs = doc_yaml("deploy.md", "## 4. Prometheus") or []
    f.check(len(jobs) == 1 and jobs[0].get("job_name") == "grove", f"deploy.md's scrape job: {jobs}")
    meta = {"__meta_kubernetes_pod_container_port_name": "metrics"}
    meta.update({"__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", k): v
                 for k, v in pod_labels.items()})
    for rule in (jobs[0].get("relabel_configs", []) if jobs else []):
        if rule.get("action") == "keep":
            value = ";".join(meta.get(label, "") for label in rule["source_labels"])
            f.check(re.fullmatch(rule["regex"], value) is not None,
                    f"{ctx}: deploy.md's scrape job drops this pod ({rule['source_labels']} = {value!r})")
        else:
            f.check(rule.get("target_label") in ("namespace", "pod"), f"deploy.md's relabel rule {rule}")
    f.check("metrics" in ports, f"{ctx}: no container port named metrics")

    # docs/operations.md's probe example ("Health and readiness") is what the manifests use.
    documented = doc_yaml("operations.md", "## Health and readiness") or {}
    f.check(set(documented) == {"livenessProbe", "readinessProbe"},
            f"operations.md's probe example: {documented}")
    for kind, want in documented.items():
        probe = c.get(kind, {})
        got = {"port": probe.get("grpc", {}).get("port"), "service": probe.get("grpc", {}).get("service", ""),
               "periodSeconds": probe.get("periodSeconds", 10)}
        doc = {"port": want.get("grpc", {}).get("port"), "service": want.get("grpc", {}).get("service", ""),
               "periodSeconds": want.get("periodSeconds", 10)}
        f.check(got == doc, f"{ctx}: {kind} {got}, operations.md's example {doc}")
    startup = c.get("startupProbe", {})
    budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    f.check(budget >= 300, f"{ctx}: startup probe allows only {budget}s for model loading (want >= 300)")
    live = c.get("livenessProbe", {})
    delay = int(env.get("GROVE_SHUTDOWN_DELAY_SECONDS") or 0)
    grace = int(env.get("GROVE_SHUTDOWN_GRACE_SECONDS") or 30)
    f.check(live.get("periodSeconds", 10) * live.get("failureThreshold", 3) > delay + grace,
            f"{ctx}: liveness could restart a draining pod (period x threshold <= delay + grace)")

    # Drain: terminationGracePeriodSeconds > preStop sleep + groved's delay + grace.
    pre = c.get("lifecycle", {}).get("preStop", {})
    pre_sleep = 0
    if "exec" in pre:
        cmd = pre["exec"]["command"]
        f.check(cmd[0] in ("/bin/sleep", "sleep") and len(cmd) == 2, f"{ctx}: preStop should be a sleep: {cmd}")
        pre_sleep = int(cmd[-1])
    elif "sleep" in pre:
        pre_sleep = int(pre["sleep"]["seconds"])
    f.check(pre_sleep > 0, f"{ctx}: no preStop")
    tgps = pod.get("terminationGracePeriodSeconds", 30)
    f.check(tgps >= pre_sleep + delay + grace + 5,
            f"{ctx}: terminationGracePeriodSeconds {tgps} < preStop {pre_sleep} + delay {delay} + grace {grace} + 5")

    # Volumes: the repository and the model config are mounted where the env says.
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    f.check(env.get("GROVE_MODEL_REPOSITORY") in mounts, f"{ctx}: model repository is not mounted")
    cfg_path = env.get("GROVE_DEFAULT_MODEL_CONFIG", "")
    cfg_dir, cfg_file = os.path.split(cfg_path)
    vol = next((v for v in pod["volumes"] if v["name"] == mounts.get(cfg_dir)), None)
    cm = vol and d.find(objs, "ConfigMap", vol.get("configMap", {}).get("name"))
    if f.check(cm is not None, f"{ctx}: {cfg_path} is not a mounted ConfigMap"):
        f.check(cfg_file in cm["data"], f"{ctx}: ConfigMap {cm['metadata']['name']} has no {cfg_file}")
        try:
            json.loads(cm["data"].get(cfg_file, ""))
        except ValueError as e:
            f.check(False, f"{ctx}: {cfg_file} is not JSON: {e}")
    f.check(pod.get("securityContext", {}).get("runAsNonRoot") is True, f"{ctx}: pod must run as non-root")
    f.check(c.get("securityContext", {}).get("readOnlyRootFilesystem") is True, f"{ctx}: root FS not read-only")

    # Services: named ports that point at the container's named ports; both serve REST and gRPC.
    services = [o for o in objs if o["kind"] == "Service"]
    f.check(len(services) >= 1, f"{ctx}: no Service")
    for s in services:
        names = {p.get("targetPort") for p in s["spec"]["ports"]}
        f.check({"http", "grpc"} <= names, f"{ctx}: Service {s['metadata']['name']} serves {sorted(names)}, "
                                           "not both http (REST) and grpc")
        f.check(all(s["spec"]["selector"].get(k) == v for k, v in s["spec"]["selector"].items()
                    if True) and all(pod_labels.get(k) == v for k, v in s["spec"]["selector"].items()),
                f"{ctx}: Service {s['metadata']['name']} does not select the pods")
        for p in s["spec"]["ports"]:
            f.check("name" in p and p.get("targetPort") in ports,
                    f"{ctx}: Service {s['metadata']['name']} port {p} must be named and target a named port")
            if p.get("targetPort") in ports:
                f.check(p["port"] == ports[p["targetPort"]],
                        f"{ctx}: Service port {p['name']} {p['port']} != container port {ports[p['targetPort']]}")

    pdb = d.find(objs, "PodDisruptionBudget")
    if f.check(pdb is not None, f"{ctx}: no PodDisruptionBudget"):
        f.check(all(pod_labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items()),
                f"{ctx}: PDB does not select the pods")

    hpa = d.find(objs, "HorizontalPodAutoscaler")
    if f.check(hpa is not None, f"{ctx}: no HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        f.check(ref["kind"] == "Deployment" and ref["name"] == name, f"{ctx}: HPA does not target {name}")
        names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
        f.check(names == {"grove_inflight_rows"}, f"{ctx}: HPA metrics {names}")
        ops = {m["pods"]["metric"]["selector"]["matchLabels"]["operation"] for m in hpa["spec"]["metrics"]}
        f.check(ops == {"predict", "explain"}, f"{ctx}: HPA operations {ops}")
        f.check("replicas" not in dep["spec"], f"{ctx}: the HPA owns the replica count; the Deployment sets it")
        f.check(hpa["spec"]["minReplicas"] >= 2, f"{ctx}: HPA minReplicas < 2 (one pod cannot drain without an outage)")

    pm = d.find(objs, "PodMonitor")
    if f.check(pm is not None, f"{ctx}: no PodMonitor"):
        f.check(all(pod_labels.get(k) == v for k, v in pm["spec"]["selector"]["matchLabels"].items()),
                f"{ctx}: PodMonitor does not select the pods")
        eps = pm["spec"]["podMetricsEndpoints"]
        f.check(all(e.get("port") == "metrics" and e.get("path", "/metrics") == "/metrics" for e in eps),
                f"{ctx}: PodMonitor must scrape port `metrics` at /metrics")
        f.check(pod_labels.get(pm["spec"].get("jobLabel", "")) == "grove",
                f"{ctx}: PodMonitor jobLabel must give job=\"grove\" (the rules' and dashboard's job)")
    f.check(d.find(objs, "PrometheusRule") is not None, f"{ctx}: no PrometheusRule")

    limits = c.get("resources", {}).get("limits", {})
    if overlay == "gpu":
        f.check(str(limits.get("nvidia.com/gpu")) == "1", f"{ctx}: limits nvidia.com/gpu should be 1")
        f.check(any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])),
                f"{ctx}: no nvidia.com/gpu toleration")
        f.check(bool(pod.get("nodeSelector")) or bool(pod.get("affinity")), f"{ctx}: no GPU node selection")
        f.check(dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith("-cuda"),
                f"{ctx}: image should be the CUDA build")
    else:
        f.check("nvidia.com/gpu" not in limits, f"{ctx}: CPU overlay asks for a GPU")
        f.check(env.get("GROVE_USE_GPU") == "false", f"{ctx}: CPU overlay should set GROVE_USE_GPU=false")
        f.check(limits.get("cpu") == c["resources"]["requests"].get("cpu"), f"{ctx}: CPU pods should be Guaranteed")


# ---------------------------------------------------------------------------------------------------
def check_rules(f):
    promtool = d.tool("promtool", "PROMTOOL")
    if not promtool:
        d.skip("promtool not installed (Debian package prometheus)")
    rules = os.path.join(d.DEPLOY, "prometheus", "grove-rules.yaml")
    out = subprocess.run([promtool, "check", "rules", rules], capture_output=True, text=True)
    f.check(out.returncode == 0, f"promtool check rules:\n{out.stdout}{out.stderr}")
    generated = os.path.join(d.DEPLOY, "k8s", "components", "monitoring", "prometheusrule.yaml")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as tmp:
        spec = d.yaml_load(generated)["spec"]
        tmp.write(json.dumps(spec))  # JSON is YAML: the operator object's groups as a rule file
        tmp.flush()
        out = subprocess.run([promtool, "check", "rules", tmp.name], capture_output=True, text=True)
        f.check(out.returncode == 0, f"promtool check rules (PrometheusRule spec):\n{out.stdout}{out.stderr}")
    out = subprocess.run([sys.executable, os.path.join(d.DEPLOY, "prometheus", "make_prometheusrule.py"), "--check"],
                         capture_output=True, text=True)
    f.check(out.returncode == 0, out.stderr.strip())
    f.check(d.yaml_load(generated)["spec"]["groups"] == d.rule_groups(), "PrometheusRule groups differ from the rules")
    test = os.path.join(d.DEPLOY, "prometheus", "tests", "grove-rules_test.yaml")
    out = subprocess.run([promtool, "test", "rules", test], capture_output=True, text=True,
                         cwd=os.path.dirname(test))
    f.check(out.returncode == 0, f"promtool test rules:\n{out.stdout}{out.stderr}")
    example = os.path.join(d.DEPLOY, "prometheus", "prometheus.example.yml")
    out = subprocess.run([promtool, "check", "config", example], capture_output=True, text=True)
    f.check(out.returncode == 0, f"promtool check config {example}:\n{out.stdout}{out.stderr}")
    jobs = [j["job_name"] for j in d.yaml_load(example)["scrape_configs"]]
    f.check(jobs == ["grove"], f"prometheus.example.yml jobs {jobs}: the rules select job=\"grove\"")
    names = [r["alert"] for r in d.alerting_rules()]
    for needed in ("GroveHighErrorRate", "GroveLatencyP99AboveSLO", "GroveQueueFull", "GroveModelNotReady",
                   "GroveGpuMemoryHigh"):
        f.check(needed in names, f"no alert {needed}")
    check_queries(f, "rule", [(r.get("record") or r.get("alert"), r["expr"]) for g in d.rule_groups()
                              for r in g["rules"]])


def record_labels(record, records, docs, seen=()):
    """Labels a recording rule's series carry: its `by` labels, or its sources' labels."""
    expr, extra = records[record]
    by = d.grouping_labels(expr)
    if by:
        return by | extra
    labels = set(extra)
    for m in d.metric_names(expr):
        if m in records and m not in seen:
            labels |= record_labels(m, records, docs, seen + (record,))
        elif d.family(m) in docs:
            labels |= docs[d.family(m)]["labels"]
    return labels


def check_queries(f, what, queries):
    """Every grove_ metric a query selects is documented, with the labels it groups and filters by."""
    docs = d.documented_metrics()
    records = {}
    for r in d.recording_rules():
        labels = set(r.get("labels", {}))
        if r["record"] in records:
            labels |= records[r["record"]][1]
        records[r["record"]] = (r["expr"], labels)
    generic = {"le", "job", "instance", "namespace", "pod", "container"}
    for name, expr in queries:
        labels = set()
        for metric in d.metric_names(expr):
            if metric in records:
                labels |= record_labels(metric, records, docs)
                continue
            fam = docs.get(d.family(metric))
            if not f.check(fam is not None or metric == "up",
                           f"{what} {name!r} queries {metric}, which docs/metrics.md does not list"):
                continue
            if fam:
                if metric != d.family(metric):
                    f.check(fam["type"] == "histogram", f"{what} {name!r}: {metric} of a {fam['type']}")
                labels |= fam["labels"]
        used = (d.grouping_labels(expr) | d.matcher_labels(expr)) - generic
        f.check(used <= labels, f"{what} {name!r} uses labels {sorted(used - labels)} that its metrics lack")


# ---------------------------------------------------------------------------------------------------
def check_dashboard(f):
    out = subprocess.run([sys.executable, os.path.join(d.DEPLOY, "grafana", "make_dashboard.py"), "--check"],
                         capture_output=True, text=True)
    f.check(out.returncode == 0, out.stderr.strip())
    dash = d.dashboard()
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    f.check(variables.get("datasource", {}).get("type") == "datasource"
            and variables["datasource"].get("query") == "prometheus", "no Prometheus datasource variable")
    for v in ("job", "instance", "model"):
        f.check(v in variables and variables[v]["type"] == "query", f"no query variable {v}")
    f.check("__inputs" not in dash and "id" not in dash or dash.get("id") is None,
            "dashboard must not pin an id (import creates one)")
    ids = set()
    for p in d.dashboard_panels(dash):
        f.check(p["id"] not in ids, f"duplicate panel id {p['id']}")
        ids.add(p["id"])
        if p["type"] != "row":
            f.check(p.get("datasource", {}).get("uid") == "${datasource}", f"panel {p['title']!r} ignores $datasource")
            for t in p.get("targets", []):
                f.check(t.get("datasource", {}).get("uid") == "${datasource}", f"query of {p['title']!r} ignores $datasource")
                if 'model=~"$model"' not in t["expr"] and "model" in str(d.grouping_labels(t["expr"])):
                    f.check(False, f"panel {p['title']!r} groups by model without the $model filter")
    titles = " | ".join(p["title"].lower() for p in d.dashboard_panels(dash))
    for word in ("throughput", "error", "p50 / p99", "queue wait", "batch size", "strategy and device",
                 "models loaded", "resident bytes", "gpu memory"):
        f.check(word in titles, f"no panel about {word!r}")
    queries = list(d.dashboard_targets(dash))
    queries += [(f"variable {v['name']}", re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", v["definition"]))
                for v in dash["templating"]["list"] if v["type"] == "query"]
    check_queries(f, "panel", queries)
    adapter = [("adapter seriesQuery", s) for s, _ in d.adapter_queries()]
    check_queries(f, "adapter", adapter)
    # The checker itself: an undocumented metric and an unknown label must fail.
    probe = d.Failures("self-test", quiet=True)
    check_queries(probe, "self-test", [("bogus metric", "sum(rate(grove_not_exported_total[5m]))"),
                                       ("bogus label", "sum by (colour) (grove_rows_total)")])
    f.check(len(probe.errors) == 2, "the query checker does not catch undocumented metrics or labels")


# ---------------------------------------------------------------------------------------------------
def check_dockerfile(f):
    docker = d.read(os.path.join(d.ROOT, "Dockerfile"))
    lines = docker.replace("\\\n", " ").splitlines()
    runs = " ".join(line for line in lines if line.strip().startswith("RUN "))
    presets = {p["name"]: p for p in json.loads(d.read(os.path.join(d.ROOT, "CMakePresets.json")))["configurePresets"]}

    # Same steps as README / scripts: install-deps.sh and build.sh with a preset.
    f.check("scripts/install-deps.sh" in runs, "Dockerfile does not run scripts/install-deps.sh")
    m = re.search(r"scripts/build\.sh \"?\$\{?GROVE_DEVICE\}?\"? ([a-z_ ]+)", runs)
    f.check(m is not None, "Dockerfile does not run scripts/build.sh \"$GROVE_DEVICE\" TARGETS")
    if m:
        targets = m.group(1).split()
        f.check("groved" in targets, f"Dockerfile builds {targets}, not groved")
        cmake_text = ""
        for dirpath, _, files in os.walk(d.ROOT):
            if "/build" in dirpath[len(d.ROOT):] or "/." in dirpath[len(d.ROOT):]:
                continue
            if "CMakeLists.txt" in files:
                cmake_text += d.read(os.path.join(dirpath, "CMakeLists.txt"))
        for t in targets:
            f.check(re.search(rf"add_executable\(\s*{t}\b", cmake_text) is not None,
                    f"Dockerfile builds target {t}, which no CMakeLists.txt defines")
    devices = re.findall(r'\[ "\$GROVE_DEVICE" !?= (\w+) \]', runs)
    default = re.search(r"^ARG GROVE_DEVICE=(\w+)", docker, re.M)
    f.check(default and default.group(1) == "cuda", "GROVE_DEVICE should default to cuda")
    for dev in set(devices) | {default.group(1) if default else "cuda"}:
        f.check(dev in presets, f"GROVE_DEVICE {dev} is not a CMake preset")
        if dev in presets:
            f.check(presets[dev]["binaryDir"] == "${sourceDir}/build/" + dev,
                    f"preset {dev} builds into {presets[dev]['binaryDir']}, the Dockerfile expects build/{dev}")
    # The presets the image builds with configure on this Debian 12 (the build stage's system). The
    # cuda preset only where the CUDA 13 toolkit is installed, as in the image.
    for dev in sorted(set(devices) | {"cuda", "cpu"}):
        if dev not in presets:
            continue
        if dev == "cuda" and not os.path.exists("/usr/local/cuda/bin/nvcc"):
            print("note: no /usr/local/cuda/bin/nvcc: the cuda preset is not configured here")
            continue
        with tempfile.TemporaryDirectory(prefix=f"grove-preset-{dev}-") as tmp:
            out = subprocess.run(["cmake", "--preset", dev, "-B", tmp, "-DGROVE_BUILD_TESTS=OFF",
                                  "-DGROVE_BUILD_BENCH=OFF"], cwd=d.ROOT, capture_output=True, text=True)
        text = out.stdout + out.stderr
        f.check(out.returncode == 0, f"`cmake --preset {dev}` (the image's build step) fails here:\n{text[-3000:]}")
    f.check(presets.get("cuda", {}).get("cacheVariables", {}).get("GROVE_CUDA") == "ON", "cuda preset lost GROVE_CUDA=ON")
    f.check(presets.get("cpu", {}).get("cacheVariables", {}).get("GROVE_CUDA") == "OFF", "cpu preset lost GROVE_CUDA=OFF")
    build_sh = os.path.join(d.ROOT, "scripts", "build.sh")
    if f.check(os.path.exists(build_sh), "scripts/build.sh does not exist"):
        text = d.read(build_sh)
        f.check("--preset" in text and "build/$PRESET" in text, "scripts/build.sh no longer builds build/<preset>")
    # Debian 12: the release install-deps.sh is written for is the one the image builds on.
    deps = d.read(os.path.join(d.ROOT, "scripts", "install-deps.sh"))
    f.check("Debian 12" in deps, "install-deps.sh no longer targets Debian 12")
    f.check(re.search(r"^ARG DEBIAN_RELEASE=bookworm$", docker, re.M) is not None, "image is not Debian 12 (bookworm)")
    # Base images are build arguments (CI passes locally made ones); their defaults are Debian's.
    f.check(re.search(r"^ARG BUILD_IMAGE=debian:\$\{DEBIAN_RELEASE\}$", docker, re.M) is not None,
            "BUILD_IMAGE does not default to debian:${DEBIAN_RELEASE}")
    f.check(re.search(r"^ARG RUNTIME_IMAGE=debian:\$\{DEBIAN_RELEASE\}-slim$", docker, re.M) is not None,
            "RUNTIME_IMAGE does not default to debian:${DEBIAN_RELEASE}-slim")
    f.check("FROM ${BUILD_IMAGE} AS build" in docker, "build stage is not FROM ${BUILD_IMAGE}")
    f.check("FROM ${RUNTIME_IMAGE} AS runtime" in docker, "runtime stage is not FROM ${RUNTIME_IMAGE}")
    # The build stage installs only what building needs, with the project's script.
    f.check("scripts/install-deps.sh --build-only" in runs, "build stage does not run install-deps.sh --build-only")
    f.check("--build-only" in deps, "install-deps.sh has no --build-only mode")
    # CUDA 13, the version the project's toolkit has.
    cuda = re.search(r"^ARG CUDA_PACKAGE_VERSION=(\d+)-(\d+)$", docker, re.M)
    f.check(cuda and cuda.group(1) == "13", "Dockerfile does not install CUDA 13")
    nvcc = "/usr/local/cuda/bin/nvcc"
    if cuda and os.path.exists(nvcc):
        v = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        mm = re.search(r"release (\d+)\.(\d+)", v)
        f.check(mm and (mm.group(1), mm.group(2)) == cuda.groups(),
                f"Dockerfile CUDA {cuda.groups()} differs from this machine's toolkit {mm and mm.groups()}")
    readme = os.path.join(d.ROOT, "README.md")
    if os.path.exists(readme):
        # README's commands install with install-deps.sh and build with build.sh, directly or through
        # the scripts it names (demo.sh, test.sh).
        text = d.read(readme)
        f.check("scripts/install-deps.sh" in text, "README.md does not name scripts/install-deps.sh")
        named = set(re.findall(r"scripts/[a-z_-]+\.sh", text))
        builders = [s_ for s_ in named if s_ == "scripts/build.sh" or (
            os.path.exists(os.path.join(d.ROOT, s_)) and "scripts/build.sh" in d.read(os.path.join(d.ROOT, s_)))]
        f.check(builders, f"no README command builds with scripts/build.sh (README names {sorted(named)})")
        print(f"README builds through {sorted(builders)}")
    else:
        print("note: README.md does not exist yet; checked against scripts/ only")

    # Runtime: non-root, ports, entry point, env defaults = entry point table = docs.
    f.check(re.search(r"^USER 10001", docker, re.M) is not None, "runtime stage must run as uid 10001")
    expose = re.search(r"^EXPOSE (.*)$", docker, re.M)
    f.check(expose and expose.group(1).split() == [str(HTTP_PORT), str(GRPC_PORT), str(METRICS_PORT)],
            "EXPOSE must be 8000 8001 8002")
    f.check('ENTRYPOINT ["/usr/local/bin/groved-entrypoint.sh"]' in docker, "ENTRYPOINT is not the entry point script")
    table = d.entrypoint_table()
    doc_flags = d.documented_flags()
    f.check(sorted(f_[2:] for f_ in table.values()) == sorted(doc_flags),
            f"entry point flags differ from docs/operations.md: {sorted(set(doc_flags) ^ {v[2:] for v in table.values()})}")
    for var, flag in table.items():
        f.check(var == "GROVE_" + flag[2:].upper(), f"entry point maps {var} to {flag}")
    runtime = lines[next(i for i, line in enumerate(lines) if " AS runtime" in line):]
    env_block = " ".join(line for line in runtime if line.startswith("ENV "))
    for var, value in re.findall(r"(GROVE_[A-Z_]+)=(\S+)", env_block):
        f.check(var in table, f"Dockerfile sets {var}, which the entry point ignores")
    f.check(f"GROVE_HTTP_PORT={HTTP_PORT}" in env_block and f"GROVE_GRPC_PORT={GRPC_PORT}" in env_block
            and f"GROVE_METRICS_PORT={METRICS_PORT}" in env_block, "Dockerfile ENV ports differ from EXPOSE")
    f.check("GROVE_MODEL_REPOSITORY=/models" in env_block, "Dockerfile GROVE_MODEL_REPOSITORY is not /models")
    ops = d.read(os.path.join(d.ROOT, "docs", "operations.md"))
    f.check("--grpc_port=8001" in ops and "--metrics_port=8002" in ops and "| 8000 |" in ops,
            "docs/operations.md ports changed")
    ignore = d.read(os.path.join(d.ROOT, ".dockerignore"))
    for path in ("build/", ".git", ".device/"):
        f.check(path in ignore, f".dockerignore does not exclude {path}")
    for path in ("scripts", "deploy", "core", "server", "proto", "client", "CMakeLists.txt"):
        f.check(not re.search(rf"^/?{re.escape(path)}/?$", ignore, re.M), f".dockerignore excludes {path}")

    # The entry point passes exactly the set variables, then the container arguments.
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "groved")
        with open(fake, "w") as g:
            g.write('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
        os.chmod(fake, 0o755)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GROVED": fake,
               "GROVE_MODEL_REPOSITORY": "/m dir", "GROVE_GRPC_PORT": "9", "GROVE_LOG_FORMAT": "",
               "GROVE_UNRELATED": "x"}
        out = subprocess.run(["sh", d.ENTRYPOINT, "--log_level=debug", "two words"], env=env,
                             capture_output=True, text=True)
        f.check(out.stdout.splitlines() == ["--model_repository=/m dir", "--grpc_port=9", "--log_level=debug",
                                            "two words"], f"entry point passed {out.stdout.splitlines()}")
    # runtime-deps.sh on a binary of this machine: packages exist, nothing unresolved.
    binary = os.environ.get("GROVE_BINARY")
    if binary and os.path.exists(binary) and d.tool("dpkg-query"):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(["sh", os.path.join(d.DEPLOY, "docker", "runtime-deps.sh"), tmp, binary],
                                 capture_output=True, text=True)
            f.check(out.returncode == 0, f"runtime-deps.sh failed: {out.stderr}")
            pkgs = d.read(os.path.join(tmp, "packages.txt")).split() if out.returncode == 0 else []
            f.check("libstdc++6" in pkgs, f"runtime-deps.sh found no libstdc++6 in {pkgs}")
            for p in pkgs:
                ok = subprocess.run(["dpkg-query", "-W", p], capture_output=True).returncode == 0
                f.check(ok, f"runtime-deps.sh names {p}, which is not an installed package")
            print(f"runtime packages of {os.path.basename(binary)}: {' '.join(pkgs)}")


# ---------------------------------------------------------------------------------------------------
KSERVE_SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                              "kserve-crd-schemas.json.gz")


def unknown_fields(value, schema, path):
    """Fields of `value` that `schema` (an openAPIV3Schema) does not declare, where the API server
    would prune them: a misspelt field is dropped silently by Kubernetes, not refused."""
    out = []
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            for key, v in value.items():
                if key in props:
                    out += unknown_fields(v, props[key], f"{path}.{key}")
                elif isinstance(extra, dict):
                    out += unknown_fields(v, extra, f"{path}.{key}")
                elif not extra:
                    out.append(f"{path}.{key}")
        elif isinstance(extra, dict):
            for key, v in value.items():
                out += unknown_fields(v, extra, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def crd_errors(doc, schemas):
    """What KServe's API server would refuse or drop of `doc`: schema violations and unknown fields."""
    import jsonschema  # noqa: PLC0415
    key = f"{doc.get('apiVersion')}/{doc.get('kind')}"
    schema = schemas.get(key)
    if schema is None:
        return [f"no KServe schema for {key} (have {sorted(schemas)})"]
    errors = [f"{'.'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}"
              for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
    errors += [f"{p}: not a field of {key} (the API server would drop it)"
               for p in unknown_fields(doc, schema, "")]
    return errors


def check_kserve(f):
    try:
        import jsonschema  # noqa: F401, PLC0415
    except ImportError:
        d.skip("python jsonschema not installed (scripts/install-deps.sh installs it)")
    import gzip  # noqa: PLC0415
    with gzip.open(KSERVE_SCHEMAS, "rt", encoding="utf-8") as src:
        vendored = json.load(src)
    schemas = vendored["schemas"]
    folder = os.path.join(d.DEPLOY, "kserve")
    docs = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".yaml"):
            docs += [(name, doc) for doc in d.yaml_load_all(d.read(os.path.join(folder, name)))]
    runtimes = [doc for _, doc in docs if doc.get("kind") == "ClusterServingRuntime"]
    services = [doc for _, doc in docs if doc.get("kind") == "InferenceService"]
    f.check(len(runtimes) == 1 and services, f"deploy/kserve: {len(runtimes)} runtimes, "
            f"{len(services)} InferenceServices (one runtime and examples expected)")
    for name, doc in docs:
        for error in crd_errors(doc, schemas):
            f.check(False, f"deploy/kserve/{name} {doc.get('kind')} {doc['metadata']['name']}: {error}")
    # The schema check itself catches what it must: a misspelt field and a wrong type.
    if runtimes:
        bad = json.loads(json.dumps(runtimes[0]))
        bad["spec"]["protocolVersion"] = ["v2"]
        bad["spec"]["containers"][0]["ports"] = "8080"
        found = crd_errors(bad, schemas)
        f.check(any("protocolVersion" in e for e in found) and any("ports" in e for e in found),
                f"the KServe schema check misses a misspelt field or a wrong type: {found}")
    if not runtimes:
        return
    runtime = runtimes[0]
    container = runtime["spec"]["containers"][0]
    f.check(container["name"] == "kserve-container",
            "the runtime's container must be named kserve-container (KServe merges the "
            "InferenceService's container into it by that name)")
    table = d.entrypoint_table()
    env = {e["name"]: e for e in container.get("env", [])}
    for var in env:
        f.check(var in table or var in ("GROVE_KSERVE_MODEL_NAME", "GROVE_KSERVE_REPOSITORY"),
                f"the runtime sets {var}, which the entry point does not read")
    f.check(env.get("GROVE_HTTP_PORT", {}).get("value") == "8080",
            "the runtime's REST port must be 8080, KServe's default container port")
    f.check(env.get("GROVE_KSERVE_MODEL_NAME", {}).get("value") == "{{.Name}}",
            "GROVE_KSERVE_MODEL_NAME must be KServe's {{.Name}} (the InferenceService's name)")
    annotations = runtime["spec"].get("annotations", {})
    f.check(annotations.get("prometheus.kserve.io/port") == env.get("GROVE_METRICS_PORT", {}).get("value"),
            "the runtime's prometheus.kserve.io/port is not its GROVE_METRICS_PORT")
    formats = {m["name"] for m in runtime["spec"]["supportedModelFormats"]}
    grpc_port = env.get("GROVE_GRPC_PORT", {}).get("value")
    for isvc in services:
        model = isvc["spec"]["predictor"]["model"]
        name = isvc["metadata"]["name"]
        f.check(model.get("runtime") == runtime["metadata"]["name"],
                f"InferenceService {name} does not name the runtime {runtime['metadata']['name']}")
        f.check(model["modelFormat"]["name"] in formats,
                f"InferenceService {name}: format {model['modelFormat']['name']} is not one the runtime supports")
        f.check(model.get("protocolVersion") in runtime["spec"]["protocolVersions"],
                f"InferenceService {name}: protocol {model.get('protocolVersion')} is not the runtime's")
        if model.get("protocolVersion") == "grpc-v2":
            ports = model.get("ports", [])
            f.check(len(ports) == 1 and ports[0].get("name") == "h2c"
                    and str(ports[0].get("containerPort")) == grpc_port,
                    f"InferenceService {name} speaks gRPC: its port must be h2c {grpc_port}")
    deploy_md = d.read(os.path.join(d.ROOT, "docs", "deploy.md"))
    for name in sorted(os.listdir(folder)):
        f.check(f"deploy/kserve/{name}" in deploy_md, f"docs/deploy.md does not show deploy/kserve/{name}")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    checks = {"manifests": check_manifests, "rules": check_rules, "dashboard": check_dashboard,
              "dockerfile": check_dockerfile, "kserve": check_kserve}
    if what not in checks:
        print(__doc__)
        return 2
    f = d.Failures(f"deploy {what}")
    checks[what](f)
    return f.finish()


if __name__ == "__main__":
    sys.exit(main())
