#!/usr/bin/env bash
# Checks the deployment kit under deploy/ without a cluster or a Docker engine:
# alert rules (promtool check + unit tests), YAML syntax, kustomize rendering,
# probes/grace periods/mounts against the daemon config, the Grafana dashboard
# (JSON, PromQL, metric names from DESIGN.md's metrics contract) and the
# systemd unit. Prints one line per check; exits 1 if any check fails.
#
# Run from the repository root: scripts/check-deploy.sh
set -euo pipefail

cd "$(dirname "$0")/.."

failures=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# check NAME COMMAND...: runs COMMAND, prints "ok   NAME" or "FAIL NAME" followed
# by the command's output, indented.
check() {
    local name="$1"
    shift
    if "$@" >"$work/out" 2>&1; then
        printf 'ok   %s\n' "$name"
    else
        printf 'FAIL %s\n' "$name"
        sed 's/^/     /' "$work/out"
        failures=$((failures + 1))
    fi
}

skip() {
    printf 'skip %s\n' "$1"
}

# ---------------------------------------------------------------- tools
install_promtool() {
    command -v promtool >/dev/null && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # Debian's `prometheus` package ships /usr/bin/promtool.
    $sudo apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null &&
        command -v promtool >/dev/null
}

install_pyyaml() {
    python3 -c 'import yaml' 2>/dev/null && return 0
    python3 -m pip install --quiet pyyaml 2>/dev/null ||
        python3 -m pip install --quiet --user pyyaml 2>/dev/null ||
        { [ "$(id -u)" -eq 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml >/dev/null; }
    python3 -c 'import yaml'
}

check "promtool available" install_promtool
check "pyyaml available" install_pyyaml

# The Python half of the checks: one subcommand per check.
cat >"$work/checks.py" <<'PY'
import json
import pathlib
import re
import sys

import yaml

# DESIGN.md "Metrics (contract)". Histogram series add _bucket/_sum/_count.
CONTRACT_METRICS = {
    "tablekeeper_table_info",
    "tablekeeper_last_success_timestamp_seconds",
    "tablekeeper_staleness_seconds",
    "tablekeeper_jobs_total",
    "tablekeeper_commit_conflicts_total",
    "tablekeeper_concurrency_key_waits_total",
    "tablekeeper_consecutive_failures",
    "tablekeeper_job_duration_seconds",
    "tablekeeper_jobs",
    "tablekeeper_table_files",
    "tablekeeper_table_size_bytes",
    "tablekeeper_table_small_files",
    "tablekeeper_table_version",
    "tablekeeper_table_commits_since_checkpoint",
    "tablekeeper_table_commits_per_hour",
    "tablekeeper_table_probe_failures_total",
    "tablekeeper_drift",
    "tablekeeper_bytes_rewritten_total",
    "tablekeeper_bytes_reclaimed_total",
    "tablekeeper_stale_writes_total",
    "tablekeeper_foreign_rewrites_total",
    "tablekeeper_table_deleted_rows",
    "tablekeeper_erasure_pending_seconds",
    "tablekeeper_table_retained_bytes",
    "tablekeeper_table_unrestorable_versions",
    "tablekeeper_inventory_tables",
    "tablekeeper_inventory_reload_failures_total",
    "tablekeeper_build_info",
}
# Exported beside the contract (README, "Metrics"): rules may use them too.
ADDITIVE_METRICS = {
    "tablekeeper_erasure_deadline_seconds",
    "tablekeeper_table_average_file_size_low",
    "tablekeeper_last_stale_write_timestamp_seconds",
    "tablekeeper_last_foreign_rewrite_timestamp_seconds",
}
HISTOGRAMS = {"tablekeeper_job_duration_seconds"}
ALLOWED = (
    CONTRACT_METRICS
    | ADDITIVE_METRICS
    | {f"{h}{s}" for h in HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
    | {"up"}
)

PROMQL_WORDS = {
    # aggregations
    "sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk",
    "bottomk", "quantile", "count_values",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max",
    "clamp_min", "delta", "deriv", "exp", "floor", "histogram_quantile",
    "idelta", "increase", "irate", "label_join", "label_replace", "ln", "log2",
    "log10", "predict_linear", "rate", "resets", "round", "scalar", "sort",
    "sort_desc", "sqrt", "time", "timestamp", "vector", "avg_over_time",
    "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
    "quantile_over_time", "stddev_over_time", "last_over_time",
    "present_over_time",
    # keywords
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
    "group_right", "bool", "offset",
}

ROOT = pathlib.Path(".")
DEPLOYMENT = ROOT / "deploy/kubernetes/deployment.yaml"
K8S_CONFIG = ROOT / "deploy/kubernetes/tablekeeper.yaml"
KUSTOMIZATION = ROOT / "deploy/kubernetes/kustomization.yaml"
WORKERS = ROOT / "deploy/kubernetes/workers"
WORKER_DEPLOYMENT = WORKERS / "worker-deployment.yaml"
SCALEDOBJECT = WORKERS / "scaledobject.yaml"
WORKERS_HPA = ROOT / "deploy/kubernetes/workers-hpa"
HPA = WORKERS_HPA / "hpa.yaml"
ALERTS = ROOT / "deploy/prometheus/alerts.yaml"
ALERT_TESTS = ROOT / "deploy/prometheus/alerts.test.yaml"
DASHBOARD = ROOT / "deploy/grafana/dashboard.json"
README = ROOT / "deploy/README.md"
UNIT = ROOT / "deploy/systemd/tablekeeper.service"
UNIT_CONFIG = ROOT / "deploy/systemd/tablekeeper.yaml"


class CheckFailed(Exception):
    pass


def fail(message):
    raise CheckFailed(message)


def seconds(duration):
    """Seconds in a daemon/systemd duration: 60s, 5m, 2h, 7d, 330s, 330."""
    match = re.fullmatch(r"\s*(\d+)\s*(s|sec|m|min|h|d|w)?\s*", str(duration))
    if not match:
        fail(f"cannot read duration {duration!r}")
    unit = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}
    return int(match.group(1)) * unit[match.group(2)]


def load_yaml_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def metric_names(expr):
    """Metric names in a PromQL expression (or a Grafana label_values query)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)  # strings
    expr = re.sub(r"#[^\n]*", "", expr)  # comments
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges and subqueries
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables
    # label lists of by/without/on/ignoring/group_left/group_right
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", expr)
    # label_values(metric, label): the label is not a metric
    expr = re.sub(r"\blabel_values\s*\(([^,()]*),[^)]*\)", r"\1", expr)
    names = set()
    for token in re.findall(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if token in PROMQL_WORDS or token == "label_values":
            continue
        if re.fullmatch(r"\d+[smhdwy]", token) or re.fullmatch(r"[eE]\d*", token):
            continue
        names.add(token)
    return names


def unknown_metrics(exprs):
    unknown = set()
    for expr in exprs:
        unknown |= metric_names(expr) - ALLOWED
    return unknown


# ------------------------------------------------------------------ checks
def yaml_parses(*dirs):
    files = sorted(p for d in dirs for p in ROOT.glob(f"{d}/**/*") if p.suffix in (".yaml", ".yml"))
    if not files:
        fail("no YAML files found")
    bad = []
    for path in files:
        try:
            load_yaml_docs(path)
        except yaml.YAMLError as e:
            bad.append(f"{path}: {e}")
    if bad:
        fail("\n".join(bad))
    print(f"{len(files)} files")


def container():
    (deployment,) = [d for d in load_yaml_docs(DEPLOYMENT) if d.get("kind") == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == "tablekeeper"]
    return deployment, spec, c


def probes():
    _, _, c = container()
    problems = []
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (c.get(probe) or {}).get("httpGet") or {}
        if get.get("path") != path:
            problems.append(f"{probe}.httpGet.path is {get.get('path')!r}, want {path!r}")
        if get.get("port") not in (8080, "http"):
            problems.append(f"{probe}.httpGet.port is {get.get('port')!r}, want 8080")
    if problems:
        fail("\n".join(problems))


def deployment_matches_config():
    deployment, spec, c = container()
    config = yaml.safe_load(K8S_CONFIG.read_text())
    problems = []
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace <= seconds(config["shutdown_grace"]):
        problems.append(
            f"terminationGracePeriodSeconds {grace} must exceed shutdown_grace {config['shutdown_grace']}"
        )
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    inventory_mount = mounts.get(config["inventory"])
    if inventory_mount is None:
        problems.append(f"nothing is mounted at the config's inventory path {config['inventory']}")
    elif "subPath" in inventory_mount:
        problems.append("the inventory mount uses subPath, which never receives ConfigMap updates")
    if "/etc/tablekeeper/tablekeeper.yaml" not in mounts:
        problems.append("the daemon config is not mounted at /etc/tablekeeper/tablekeeper.yaml")
    port = int(str(config["listen"]).rsplit(":", 1)[1])
    if port not in [p["containerPort"] for p in c.get("ports", [])]:
        problems.append(f"listen port {port} is not a containerPort")
    if deployment["spec"].get("replicas", 1) < 2:
        problems.append("fewer than 2 replicas")
    env = {e["name"]: e for e in c.get("env", [])}
    for name in ("TABLEKEEPER_DATABASE_URL", "TABLEKEEPER_ADMIN_TOKEN", "TABLEKEEPER_REPLICA_ID"):
        if name not in env:
            problems.append(f"env {name} is not set")
    security = c.get("securityContext", {})
    if not security.get("readOnlyRootFilesystem"):
        problems.append("readOnlyRootFilesystem is not set")
    if not spec.get("securityContext", {}).get("runAsNonRoot"):
        problems.append("runAsNonRoot is not set")
    if problems:
        fail("\n".join(problems))


def secret_env(c, name):
    """(Secret name, key) of env `name` of container `c`, or None."""
    ref = ({e["name"]: e for e in c.get("env", [])}.get(name) or {}).get("valueFrom", {}).get("secretKeyRef")
    return (ref["name"], ref["key"]) if ref else None


def worker_container():
    (deployment,) = [d for d in load_yaml_docs(WORKER_DEPLOYMENT) if d.get("kind") == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (c,) = [c for c in spec["containers"] if c["name"] == "tablekeeper"]
    return deployment, spec, c


def worker_deployment():
    daemon, daemon_spec, daemon_c = container()
    deployment, spec, c = worker_container()
    config = yaml.safe_load(K8S_CONFIG.read_text())
    problems = []
    if deployment["metadata"]["name"] != "tablekeeper-worker":
        problems.append(f"the worker Deployment is named {deployment['metadata']['name']!r}")
    selector = deployment["spec"]["selector"]["matchLabels"]
    if selector.get("app.kubernetes.io/component") != "worker":
        problems.append(f"the worker selector {selector} does not select component: worker")
    if selector == daemon["spec"]["selector"]["matchLabels"]:
        problems.append("the worker selector equals the daemon's: each Deployment would adopt the other's pods")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        problems.append("the pod template's labels do not match the selector")
    if "replicas" in deployment["spec"]:
        problems.append("spec.replicas is set: every apply would reset the autoscaler's count")
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("TABLEKEEPER_ROLE", {}).get("value") != "worker":
        problems.append("TABLEKEEPER_ROLE is not `worker`")
    if "TABLEKEEPER_ADMIN_TOKEN" in env:
        problems.append("a worker serves no API: it must not get TABLEKEEPER_ADMIN_TOKEN")
    if env.get("TABLEKEEPER_REPLICA_ID", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        problems.append("TABLEKEEPER_REPLICA_ID is not the pod name")
    want = secret_env(daemon_c, "TABLEKEEPER_DATABASE_URL")
    if secret_env(c, "TABLEKEEPER_DATABASE_URL") != want:
        problems.append(f"TABLEKEEPER_DATABASE_URL does not come from Secret/key {want}")
    if c.get("image") != daemon_c.get("image"):
        problems.append(f"image {c.get('image')!r} differs from deployment.yaml's {daemon_c.get('image')!r}")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if grace <= seconds(config["shutdown_grace"]):
        problems.append(
            f"terminationGracePeriodSeconds {grace} must exceed shutdown_grace {config['shutdown_grace']}"
        )
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        if ((c.get(probe) or {}).get("httpGet") or {}).get("path") != path:
            problems.append(f"{probe} is not {path}")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    for path, m in {m["mountPath"]: m for m in daemon_c.get("volumeMounts", [])}.items():
        if mounts.get(path, {}).get("subPath") != m.get("subPath") or path not in mounts:
            problems.append(f"{path} is not mounted as in deployment.yaml")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for v in daemon_spec.get("volumes", []):
        if "configMap" in v and volumes.get(v["name"], {}).get("configMap") != v["configMap"]:
            problems.append(f"volume {v['name']} is not the ConfigMap {v['configMap']['name']}")
    if spec.get("securityContext") != daemon_spec.get("securityContext"):
        problems.append("the pod securityContext differs from deployment.yaml's")
    if c.get("securityContext") != daemon_c.get("securityContext"):
        problems.append("the container securityContext differs from deployment.yaml's")
    resources = c.get("resources", {})
    if not resources.get("requests", {}).get("cpu") or not resources.get("limits", {}).get("memory"):
        problems.append("the worker needs a CPU request (the HPA measures against it) and a memory limit")
    # The component repeats the base's image mapping: the base's `images:` does not
    # reach a component's resources.
    base_images = yaml.safe_load(KUSTOMIZATION.read_text()).get("images")
    if yaml.safe_load((WORKERS / "kustomization.yaml").read_text()).get("images") != base_images:
        problems.append(f"workers/kustomization.yaml's images differ from the base's {base_images}")
    if problems:
        fail("\n".join(problems))


def scaledobject():
    _, _, daemon_c = container()
    deployment, _, _ = worker_container()
    config = yaml.safe_load(K8S_CONFIG.read_text())
    docs = load_yaml_docs(SCALEDOBJECT)
    (scaled,) = [d for d in docs if d.get("kind") == "ScaledObject"]
    auths = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "TriggerAuthentication"}
    spec = scaled["spec"]
    problems = []
    if scaled.get("apiVersion") != "keda.sh/v1alpha1":
        problems.append(f"apiVersion {scaled.get('apiVersion')}")
    target = spec.get("scaleTargetRef", {})
    if target.get("name") != deployment["metadata"]["name"] or target.get("kind", "Deployment") != "Deployment":
        problems.append(f"scaleTargetRef {target} does not name the worker Deployment")
    triggers = [t for t in spec.get("triggers", []) if t.get("type") == "postgresql"]
    if len(triggers) != 1:
        fail(f"want one postgresql trigger, found {len(triggers)}")
    (trigger,) = triggers
    metadata = trigger.get("metadata", {})
    if metadata.get("targetQueryValue") != str(config["workers"]):
        problems.append(
            f"targetQueryValue {metadata.get('targetQueryValue')!r} must be `workers` in tablekeeper.yaml "
            f"({config['workers']}) as a string"
        )
    query = metadata.get("query", "")
    for table in ("job_tasks", "jobs"):
        if not re.search(rf"\bFROM\s+{table}\b", query):
            problems.append(f"the query does not read {table}")
    auth = auths.get(trigger.get("authenticationRef", {}).get("name"))
    if auth is None:
        problems.append("authenticationRef names no TriggerAuthentication in scaledobject.yaml")
    else:
        refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"].get("secretTargetRef", [])}
        want = secret_env(daemon_c, "TABLEKEEPER_DATABASE_URL")
        if refs.get("connection") != want:
            problems.append(f"TriggerAuthentication parameter `connection` is {refs.get('connection')}, want {want}")
    if spec.get("minReplicaCount", 0) > spec.get("maxReplicaCount", 100):
        problems.append("minReplicaCount above maxReplicaCount")
    # Scale-in must not come faster than a drain.
    grace = seconds(config["shutdown_grace"])
    if spec.get("cooldownPeriod", 300) <= grace:
        problems.append(f"cooldownPeriod {spec.get('cooldownPeriod', 300)} must exceed shutdown_grace ({grace}s)")
    behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
    window = behavior.get("scaleDown", {}).get("stabilizationWindowSeconds", 300)
    if window <= grace:
        problems.append(f"scaleDown.stabilizationWindowSeconds {window} must exceed shutdown_grace ({grace}s)")
    if problems:
        fail("\n".join(problems))


def hpa():
    deployment, _, _ = worker_container()
    config = yaml.safe_load(K8S_CONFIG.read_text())
    (autoscaler,) = [d for d in load_yaml_docs(HPA) if d.get("kind") == "HorizontalPodAutoscaler"]
    spec = autoscaler["spec"]
    problems = []
    if autoscaler.get("apiVersion") != "autoscaling/v2":
        problems.append(f"apiVersion {autoscaler.get('apiVersion')}")
    if spec.get("scaleTargetRef", {}).get("name") != deployment["metadata"]["name"]:
        problems.append(f"scaleTargetRef {spec.get('scaleTargetRef')} does not name the worker Deployment")
    if not any(m.get("type") == "Resource" and m["resource"]["name"] == "cpu" for m in spec.get("metrics", [])):
        problems.append("no CPU metric")
    window = spec.get("behavior", {}).get("scaleDown", {}).get("stabilizationWindowSeconds", 300)
    grace = seconds(config["shutdown_grace"])
    if window <= grace:
        problems.append(f"scaleDown.stabilizationWindowSeconds {window} must exceed shutdown_grace ({grace}s)")
    components = yaml.safe_load((WORKERS_HPA / "kustomization.yaml").read_text()).get("components", [])
    if "../workers" not in components:
        problems.append("workers-hpa does not take the worker Deployment from ../workers")
    if problems:
        fail("\n".join(problems))


def rendered_workers(path, autoscaler):
    """The render of the base plus a workers component: both Deployments on one image, the
    worker Deployment once, `autoscaler` present and the other autoscaler absent."""
    docs = load_yaml_docs(path)
    kinds = [d.get("kind") for d in docs]
    deployments = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Deployment"}
    problems = []
    if kinds.count("Deployment") != 2 or set(deployments) != {"tablekeeper", "tablekeeper-worker"}:
        problems.append(f"want Deployments tablekeeper and tablekeeper-worker once each, got {sorted(deployments)}")
    images = {
        name: [c["image"] for c in d["spec"]["template"]["spec"]["containers"]]
        for name, d in deployments.items()
    }
    if len({tuple(v) for v in images.values()}) != 1:
        problems.append(f"the Deployments render different images: {images}")
    other = {"ScaledObject": "HorizontalPodAutoscaler", "HorizontalPodAutoscaler": "ScaledObject"}[autoscaler]
    if autoscaler not in kinds:
        problems.append(f"no {autoscaler}")
    if other in kinds:
        problems.append(f"a {other} too: one autoscaler only")
    if autoscaler == "ScaledObject" and "TriggerAuthentication" not in kinds:
        problems.append("no TriggerAuthentication")
    if autoscaler == "HorizontalPodAutoscaler" and "TriggerAuthentication" in kinds:
        problems.append("a TriggerAuthentication without KEDA")
    if problems:
        fail("\n".join(problems))


def inventory_generator_complete():
    kustomization = yaml.safe_load(KUSTOMIZATION.read_text())
    (generator,) = [g for g in kustomization["configMapGenerator"] if g["name"] == "tablekeeper-inventory"]
    listed = set(generator["files"])
    base = KUSTOMIZATION.parent
    on_disk = {
        str(p.relative_to(base)) for p in (base / "inventory").iterdir() if p.suffix in (".yaml", ".yml")
    }
    problems = [f"{f} is listed but missing" for f in sorted(listed - on_disk)]
    problems += [f"{f} exists but is not in the configMapGenerator" for f in sorted(on_disk - listed)]
    if not (generator.get("options") or {}).get("disableNameSuffixHash"):
        problems.append("the inventory ConfigMap must not get a hash suffix (it would restart pods)")
    if problems:
        fail("\n".join(problems))


def alerts_metrics():
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    unknown = unknown_metrics(r["expr"] for r in rules)
    if unknown:
        fail("not in the metrics contract: " + ", ".join(sorted(unknown)))


def alerts_shape():
    rules = [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    anchors = set()
    for line in README.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)))
    problems = []
    for rule in rules:
        name = rule.get("alert", rule.get("record"))
        if "alert" not in rule:
            continue
        if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            problems.append(f"{name}: severity label missing or unknown")
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not annotations.get(key):
                problems.append(f"{name}: annotation {key} missing")
        anchor = annotations.get("runbook_url", "").partition("#")[2]
        if anchor not in anchors:
            problems.append(f"{name}: runbook anchor #{anchor} has no heading in {README}")
        # Per-table alerts aggregate `by (table, ...)`; they must carry owner.
        per_table = re.search(r"\bby\s*\(\s*table\b", rule["expr"])
        if per_table and not re.search(r"group_left\s*\(\s*owner\s*\)", rule["expr"]):
            problems.append(f"{name}: a per-table alert must join tablekeeper_table_info for owner")
    if problems:
        fail("\n".join(problems))
    print(f"{len(rules)} alerts")


def alerts_all_tested():
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"] if "alert" in r}
    fired, quiet = set(), set()
    for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    problems = [f"{a}: no test makes it fire" for a in sorted(alerts - fired)]
    problems += [f"{a}: no test shows it quiet" for a in sorted(alerts - quiet)]
    problems += [f"{a}: tested but not defined" for a in sorted((fired | quiet) - alerts)]
    if problems:
        fail("\n".join(problems))


def dashboard_exprs(dashboard):
    exprs = []

    def walk(panels):
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    return exprs


def dashboard_json():
    dashboard = json.loads(DASHBOARD.read_text())
    problems = []
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append("no `datasource` variable of type datasource")
    for name in ("table", "owner"):
        if "tablekeeper_table_info" not in json.dumps(variables.get(name, {}).get("query", "")):
            problems.append(f"variable `{name}` does not come from tablekeeper_table_info")
    ids = []

    def walk(panels):
        for panel in panels:
            ids.append(panel.get("id"))
            walk(panel.get("panels", []))

    walk(dashboard.get("panels", []))
    if len(ids) != len(set(ids)):
        problems.append("panel ids are not unique")
    if not dashboard_exprs(dashboard):
        problems.append("no queries")
    if problems:
        fail("\n".join(problems))
    print(f"{len(ids)} panels, schemaVersion {dashboard.get('schemaVersion')}")


def dashboard_metrics():
    text = DASHBOARD.read_text()
    dashboard = json.loads(text)
    exprs = dashboard_exprs(dashboard)
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            exprs.append(query)
    unknown = unknown_metrics(exprs)
    # Also any metric-looking name in titles and descriptions.
    unknown |= set(re.findall(r"\btablekeeper_[a-z0-9_]+", text)) - ALLOWED
    if unknown:
        fail("not in the metrics contract: " + ", ".join(sorted(unknown)))


def dashboard_rule_file(out):
    """Writes the dashboard's queries as a rule file so promtool parses them."""
    dashboard = json.loads(DASHBOARD.read_text())
    rules = []
    for i, expr in enumerate(dashboard_exprs(dashboard)):
        expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m").replace("$__range", "1h")
        expr = re.sub(r"\$\{?(table|owner)\}?", ".*", expr)
        if "$" in expr:
            fail(f"unexpected Grafana variable in {expr}")
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    pathlib.Path(out).write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))


def systemd_grace():
    unit = UNIT.read_text()
    match = re.search(r"^TimeoutStopSec=(\S+)", unit, re.M)
    if not match:
        fail("TimeoutStopSec is not set")
    grace = yaml.safe_load(UNIT_CONFIG.read_text())["shutdown_grace"]
    if seconds(match.group(1)) <= seconds(grace):
        fail(f"TimeoutStopSec={match.group(1)} must exceed shutdown_grace {grace}")
    for line in ("ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM", "Restart=on-failure"):
        if line not in unit:
            fail(f"missing {line}")


def dockerfile():
    text = (ROOT / "deploy/Dockerfile").read_text()
    problems = []
    for needle in (
        "FROM ${RUST_IMAGE} AS builder",
        "ARG RUST_IMAGE=rust:1.95-bookworm",
        "ARG RUNTIME_IMAGE=debian:bookworm-slim",
        "cargo build --release --locked -p tablekeeper",
        "USER 10001:10001",
        'ENTRYPOINT ["/usr/local/bin/tablekeeper"]',
        'CMD ["run", "--config", "/etc/tablekeeper/tablekeeper.yaml"]',
        "EXPOSE 8080",
    ):
        if needle not in text:
            problems.append(f"missing: {needle}")
    # COPY sources from the build context must exist, or `docker build` fails.
    for source in re.findall(r"^COPY (?!--from)(\S+) ", text, re.M):
        path = ROOT / source
        if source.endswith("/"):
            if not (path.is_dir() and any(path.iterdir())):
                problems.append(f"COPY source {source} is missing or empty (git keeps no empty directories)")
        elif not path.exists():
            problems.append(f"COPY source {source} is missing")
    if problems:
        fail("\n".join(problems))


def main():
    command, *args = sys.argv[1:]
    try:
        globals()[command](*args)
    except CheckFailed as e:
        print(e)
        sys.exit(1)


main()
PY

py() {
    python3 "$work/checks.py" "$@"
}

# ---------------------------------------------------------------- prometheus
if command -v promtool >/dev/null; then
    check "promtool check rules deploy/prometheus/alerts.yaml" promtool check rules deploy/prometheus/alerts.yaml
    check "promtool test rules deploy/prometheus/alerts.test.yaml" promtool test rules deploy/prometheus/alerts.test.yaml
else
    printf 'FAIL promtool rules checks (promtool missing)\n'
    failures=$((failures + 1))
fi

if ! python3 -c 'import yaml' 2>/dev/null; then
    printf 'FAIL YAML checks (PyYAML missing)\n'
    exit 1
fi

check "alerts use only contract metrics" py alerts_metrics
check "alerts have severity, summary, description, runbook anchor, owner" py alerts_shape
check "every alert is tested firing and quiet" py alerts_all_tested

# ---------------------------------------------------------------- YAML and kubernetes
check "YAML parses (deploy/kubernetes, deploy/prometheus, deploy/ci)" \
    py yaml_parses deploy/kubernetes deploy/prometheus deploy/ci
check "k8s probes: liveness /healthz, readiness /readyz on 8080" py probes
check "k8s deployment matches daemon config (grace, mounts, port, env, security)" py deployment_matches_config
check "k8s inventory configMapGenerator lists every inventory file" py inventory_generator_complete
check "k8s worker Deployment: role worker, image, Secret key, grace, probes, mounts as deployment.yaml" py worker_deployment
check "k8s ScaledObject: targets the workers, targetQueryValue = workers, Secret, cooldown above grace" py scaledobject
check "k8s worker HPA: targets the workers on CPU, scale-down window above grace" py hpa

kustomize_build() {
    if command -v kustomize >/dev/null; then
        kustomize build "$@"
    else
        kubectl kustomize "$@"
    fi
}

# render_overlay COMPONENT: builds an overlay of a copy of the base plus COMPONENT into
# $work/render-COMPONENT.yaml.
render_overlay() {
    local component="$1"
    [ -d "$work/base" ] || cp -r deploy/kubernetes "$work/base"
    mkdir -p "$work/overlay-$component"
    printf 'resources: [../base]\ncomponents: [../base/%s]\n' "$component" >"$work/overlay-$component/kustomization.yaml"
    kustomize_build "$work/overlay-$component" >"$work/render-$component.yaml"
}

render_with_component() {
    render_overlay monitoring && grep -q '^kind: ServiceMonitor$' "$work/render-monitoring.yaml"
}

render_workers() {
    render_overlay workers && py rendered_workers "$work/render-workers.yaml" ScaledObject
}

render_workers_hpa() {
    render_overlay workers-hpa && py rendered_workers "$work/render-workers-hpa.yaml" HorizontalPodAutoscaler
}

if command -v kustomize >/dev/null || command -v kubectl >/dev/null; then
    check "kustomize build deploy/kubernetes" kustomize_build deploy/kubernetes
    check "kustomize build with the monitoring component" render_with_component
    check "kustomize build with the workers component (ScaledObject, worker Deployment)" render_workers
    check "kustomize build with the workers-hpa component (HPA, worker Deployment)" render_workers_hpa
else
    skip "kustomize build (no kustomize or kubectl)"
fi

# The example inventory must pass the real validator. Uses an already built
# binary (this script never compiles); skipped when there is none.
tablekeeper_bin=""
for candidate in "$(command -v tablekeeper || true)" \
    "${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tablekeeper-target}/debug/tablekeeper" \
    target/debug/tablekeeper; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
        tablekeeper_bin="$candidate"
        break
    fi
done
if [ -n "$tablekeeper_bin" ]; then
    check "tablekeeper validate deploy/kubernetes/inventory ($tablekeeper_bin)" \
        "$tablekeeper_bin" validate deploy/kubernetes/inventory
else
    skip "tablekeeper validate deploy/kubernetes/inventory (no built tablekeeper binary)"
fi

# ---------------------------------------------------------------- grafana
check "dashboard.json is a valid dashboard" py dashboard_json
check "dashboard uses only contract metrics" py dashboard_metrics
if command -v promtool >/dev/null; then
    dashboard_promql() {
        py dashboard_rule_file "$work/dashboard-rules.yaml" && promtool check rules "$work/dashboard-rules.yaml"
    }
    check "dashboard queries parse as PromQL" dashboard_promql
fi

# ---------------------------------------------------------------- systemd
check "systemd unit: stop timeout above shutdown_grace, reload, restart" py systemd_grace

systemd_verify() {
    # The unit names /usr/local/bin/tablekeeper, which a checkout does not
    # install; verify a copy pointing at /bin/true when it is missing.
    local unit=deploy/systemd/tablekeeper.service
    if [ ! -x /usr/local/bin/tablekeeper ]; then
        mkdir -p "$work/systemd"
        sed 's#^ExecStart=/usr/local/bin/tablekeeper#ExecStart=/bin/true#' "$unit" >"$work/systemd/tablekeeper.service"
        unit="$work/systemd/tablekeeper.service"
    fi
    local out
    out="$(systemd-analyze verify "$unit" 2>&1)" || { echo "$out"; return 1; }
    # verify exits 0 on some warnings; treat any output as a problem.
    [ -z "$out" ] || { echo "$out"; return 1; }
}

if command -v systemd-analyze >/dev/null; then
    check "systemd-analyze verify deploy/systemd/tablekeeper.service" systemd_verify
else
    skip "systemd-analyze verify (systemd-analyze not installed)"
fi

# ---------------------------------------------------------------- docker
check "Dockerfile: pinned bases, non-root user, entrypoint, COPY sources exist" py dockerfile
if command -v hadolint >/dev/null; then
    check "hadolint deploy/Dockerfile" hadolint deploy/Dockerfile
else
    skip "hadolint (not installed; no Docker engine needed for the other checks)"
fi

if [ "$failures" -gt 0 ]; then
    printf '%d check(s) failed\n' "$failures"
    exit 1
fi
printf 'all deploy checks passed\n'
