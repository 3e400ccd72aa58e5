#!/usr/bin/env python3
"""Offline checks of helm/oka, helm/oka-locust and deploy/eks (run by helm/ci_check.sh).

For every values file: `helm lint --strict`, `helm template`, each rendered object
validated with kubernetes-validate (strict) against --kube-version, then assertions on
the render: Guaranteed QoS with whole CPUs and one worker per CPU, probes on the right
paths and ports, Oka's shutdown delay and grace against the termination grace, the
ALB annotations of the EKS values, the bundled Redis only when enabled, the API keys
Secret mounted when auth is on, the Locust chart's master/workers/locustfile ConfigMap
and workload (a file as JSON, an existing ConfigMap, the registry),
the Grafana dashboard's metric names against docs/metrics.md, documented values, the
eksctl ClusterConfig against the chart's EKS values. Guard rails are checked by
renders that must fail.

With target/debug/oka (and locust/.venv) present it also runs the chart's own scripts
against a local `oka serve --demo`: the helm test script (without and with API keys),
`oka validate` of the rendered specs, and the Locust master Job's script with one worker.

Prints one line per check and ends with `helm-check: N passed, M failed[, K skipped]`.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import shutil
import socket
import string
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OKA = os.path.join(ROOT, "helm", "oka")
LOCUST = os.path.join(ROOT, "helm", "oka-locust")
EKS = os.path.join(ROOT, "deploy", "eks")
LOCUST_FILES = {"locustfile.py": "locustfile", "run.py": "runPy", "oka_result.py": "okaResult"}
SEED_WORKLOAD = os.path.join(ROOT, "locust", "workloads", "seed.yaml")
PAYMENTS_WORKLOAD = os.path.join(ROOT, "examples", "workloads", "payments", "workload.yaml")
SET_FILES = [a for k, v in LOCUST_FILES.items()
             for a in ("--set-file", f"locustFiles.{v}={os.path.join(ROOT, 'locust', k)}")]
CRD_GROUPS = ("monitoring.coreos.com/",)   # ServiceMonitor: a CRD, checked by hand below


class Checks:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def check(self, name, fn, *args):
        try:
            r = fn(*args)
        except Skip as e:
            self.skipped += 1
            print(f"skip {name}: {e}")
            return None
        except Exception as e:  # noqa: BLE001 - every failure is reported, then counted
            self.failed += 1
            msg = str(e) if isinstance(e, AssertionError) else "".join(
                traceback.format_exception_only(type(e), e)).strip()
            print(f"FAIL {name}: {msg}")
            return None
        self.passed += 1
        print(f"ok   {name}")
        return r


class Skip(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ------------------------------------------------------------------ rendering

class Render:
    """One `helm template` result, with lookups."""

    def __init__(self, name, text):
        self.name = name
        self.docs = [d for d in yaml.safe_load_all(text) if d]

    def all(self, kind):
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind, suffix=None):
        xs = [d for d in self.all(kind) if suffix is None or d["metadata"]["name"].endswith(suffix)]
        assert len(xs) == 1, f"{self.name}: expected one {kind}{' *' + suffix if suffix else ''}, found {len(xs)}"
        return xs[0]

    def named(self, kind, name):
        xs = [d for d in self.all(kind) if d["metadata"]["name"] == name]
        assert xs, f"{self.name}: no {kind} {name}"
        return xs[0]


def helm_template(helm, kube, chart, release, namespace, args):
    r = run([helm, "template", release, chart, "--namespace", namespace, "--kube-version", kube] + args)
    if r.returncode != 0:
        raise AssertionError(r.stderr.strip()[-800:])
    return r.stdout


def helm_lint(helm, kube, chart, args):
    r = run([helm, "lint", "--strict", chart, "--kube-version", kube] + args)
    assert r.returncode == 0, (r.stdout + r.stderr).strip()[-800:]


def validate_k8s(render: Render, kube: str):
    import kubernetes_validate
    import kubernetes_validate.utils as kvu
    if not hasattr(kvu.schema_contents, "cache_info"):
        kvu.schema_contents = functools.lru_cache(maxsize=None)(kvu.schema_contents)
    errors, n, crds = [], 0, 0
    for d in render.docs:
        if d["apiVersion"].startswith(CRD_GROUPS):
            crds += 1
            continue
        try:
            kubernetes_validate.validate(d, kube, strict=True)
            n += 1
        except Exception as e:  # noqa: BLE001
            errors.append(f"{d['kind']}/{d['metadata']['name']}: {getattr(e, 'message', e)}")
    assert not errors, "; ".join(errors)[:1500]
    return n, crds


# ------------------------------------------------------------------ helpers

def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def container(pod_spec, name):
    for c in pod_spec["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"no container {name}")


def port_number(c, name_or_number):
    if isinstance(name_or_number, int):
        return name_or_number
    for p in c.get("ports", []):
        if p["name"] == name_or_number:
            return p["containerPort"]
    raise AssertionError(f"container {c['name']} has no port named {name_or_number}")


def listen_port(addr):
    return int(addr.rsplit(":", 1)[1])


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


# ------------------------------------------------------------------ oka assertions

def assert_standard_labels(r: Render):
    need = ["app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
            "app.kubernetes.io/managed-by", "app.kubernetes.io/component", "helm.sh/chart"]
    for d in r.docs:
        labels = d["metadata"].get("labels", {})
        missing = [k for k in need if k not in labels]
        assert not missing, f"{d['kind']}/{d['metadata']['name']} lacks {missing}"
        tpl = d.get("spec", {}).get("template")
        if tpl and "selector" in d["spec"]:
            sel = d["spec"]["selector"]["matchLabels"]
            assert labels_match(sel, tpl["metadata"]["labels"]), f"{d['metadata']['name']}: selector does not match the pod labels"


def assert_images_pinned(r: Render):
    for d in r.docs:
        spec = d.get("spec", {})
        pod = spec.get("template", {}).get("spec") or (spec if d["kind"] == "Pod" else None)
        if not pod:
            continue
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            image = c["image"]
            assert ":" in image.rsplit("/", 1)[-1], f"{c['name']}: image {image} has no tag"
            assert not image.endswith(":latest"), f"{c['name']}: image {image} is latest"


def assert_oka_deployment(r: Render, expect_workers=None):
    dep = r.one("Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = container(pod, "oka")
    env = env_of(c)
    # Guaranteed QoS: every container (init ones too) has requests == limits, whole CPUs.
    for x in pod["containers"] + pod.get("initContainers", []):
        req, lim = x["resources"]["requests"], x["resources"]["limits"]
        for res in ("cpu", "memory"):
            assert str(req[res]) == str(lim[res]), f"{x['name']}: {res} request {req[res]} != limit {lim[res]}"
        assert re.fullmatch(r"[1-9][0-9]*", str(lim["cpu"])), f"{x['name']}: cpu {lim['cpu']} is not a whole number"
    cpus = int(str(c["resources"]["limits"]["cpu"]))
    workers = int(env["OKA_WORKERS"])
    assert workers == cpus, f"OKA_WORKERS {workers} != CPU limit {cpus}"
    if expect_workers is not None:
        assert workers == expect_workers, f"OKA_WORKERS {workers}, expected {expect_workers}"
    # Probes: liveness/startup on /healthz, readiness on /readyz, all on the admin port.
    admin = listen_port(env["OKA_ADMIN_LISTEN"])
    http = listen_port(env["OKA_LISTEN"])
    assert port_number(c, "http") == http, "container port http != OKA_LISTEN"
    for probe, path in (("livenessProbe", "/healthz"), ("startupProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = c[probe]["httpGet"]
        assert g["path"] == path, f"{probe} path {g['path']}, expected {path}"
        assert port_number(c, g["port"]) == admin, f"{probe} port is not the admin port {admin}"
    assert c["readinessProbe"]["timeoutSeconds"] * 1000 > int(env["OKA_STORE_TIMEOUT_MS"]), \
        "readiness timeout is not longer than the store timeout"
    # Shutdown: Oka's drain delay, then its grace; the pod's grace period covers both
    # (no preStop hook: Oka drains by itself).
    assert "lifecycle" not in c, f"a lifecycle hook {c.get('lifecycle')}"
    pre = int(env["OKA_SHUTDOWN_DELAY_S"])
    grace = int(env["OKA_SHUTDOWN_GRACE_S"])
    tgp = pod["terminationGracePeriodSeconds"]
    assert pre > 0 and tgp >= pre + grace + 5, f"terminationGracePeriodSeconds {tgp} < delay {pre} + grace {grace} + 5"
    # Pinning only with exclusive cores (Guaranteed, whole CPUs: checked above).
    assert env["OKA_PIN"] in ("true", "false")
    # Hardening.
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    # The serving Service targets the http port; the admin Service the admin port.
    svc = r.named("Service", dep["metadata"]["name"])
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http"], "the serving Service must expose only http"
    assert labels_match(svc["spec"]["selector"], dep["spec"]["template"]["metadata"]["labels"])
    adm = r.named("Service", dep["metadata"]["name"] + "-admin")
    assert adm["spec"]["ports"][0]["targetPort"] == "admin"
    return dep, pod, c, env


def assert_spec_source(r: Render, demo: bool, cm_name=None, cm_key="spec.yaml"):
    dep, pod, c, env = assert_oka_deployment(r)
    if demo:
        assert "--demo" in c["args"] and "OKA_SPEC" not in env, "demo: expected --demo and no OKA_SPEC"
        return
    assert "--demo" not in c["args"]
    spec_path = env["OKA_SPEC"]
    mount = [m for m in c["volumeMounts"] if spec_path.startswith(m["mountPath"] + "/")]
    assert mount and "subPath" not in mount[0], f"OKA_SPEC {spec_path} is not under a directory mount"
    vol = [v for v in pod["volumes"] if v["name"] == mount[0]["name"]][0]
    name = vol["configMap"]["name"]
    assert spec_path.endswith("/" + cm_key), f"OKA_SPEC {spec_path}, expected key {cm_key}"
    if cm_name:
        assert name == cm_name, f"spec ConfigMap {name}, expected {cm_name}"
        assert not [d for d in r.all("ConfigMap") if d["metadata"]["name"] == name], "an existing ConfigMap must not be rendered"
    else:
        cm = r.named("ConfigMap", name)
        assert cm_key in cm["data"], f"ConfigMap {name} has no {cm_key}"
        yaml.safe_load(cm["data"][cm_key])


def assert_python(r: Render, default: Render):
    cm = r.one("ConfigMap", "-spec")
    assert "features.py" in cm["data"] and "def simple" in cm["data"]["features.py"], cm["data"].keys()
    assert "python: {file: features.py" in cm["data"]["spec.yaml"], "the spec names the module"
    env = env_of(container(r.one("Deployment")["spec"]["template"]["spec"], "oka"))
    assert env.get("OKA_PYTHON") == "/opt/udfs/bin/python", env
    assert env.get("OKA_PYTHON_WORKERS") == "3" and env.get("OKA_PYTHON_MEMORY_MIB") == "512", env
    env = env_of(container(default.one("Deployment")["spec"]["template"]["spec"], "oka"))
    assert "OKA_PYTHON" not in env and "OKA_PYTHON_WORKERS" not in env, env
    assert env.get("OKA_PYTHON_MEMORY_MIB") == "1024", env


def assert_redis(r: Render, enabled: bool, password: bool = True):
    sts = r.all("StatefulSet")
    dep, pod, c, env = assert_oka_deployment(r)
    if not enabled:
        assert not sts, "a Redis StatefulSet is rendered although redis.enabled is false"
        assert not pod.get("initContainers"), "wait-for-redis without the bundled Redis"
        return
    assert len(sts) == 1, "no Redis StatefulSet"
    s = sts[0]
    rc = container(s["spec"]["template"]["spec"], "redis")
    assert re.fullmatch(r"redis:\d+\.\d+\.\d+(-\S+)?", rc["image"]), f"Redis image {rc['image']} is not a pinned official tag"
    svc = r.named("Service", s["metadata"]["name"])
    assert svc["spec"]["ports"][0]["port"] == 6379
    assert r.named("Service", s["spec"]["serviceName"])["spec"]["clusterIP"] == "None"
    url = env["OKA_STORE"]
    assert f"@{svc['metadata']['name']}:6379" in url or url == f"redis://{svc['metadata']['name']}:6379", f"OKA_STORE {url} is not the bundled Redis"
    assert pod["initContainers"][0]["name"] == "wait-for-redis"
    renv = env_of(rc)
    if password:
        assert "$(REDIS_PASSWORD)" in url and "REDIS_PASSWORD" in renv, "bundled Redis without a password"
        assert renv["REDIS_PASSWORD"] == env["REDIS_PASSWORD"], "Oka and Redis read different password Secrets"
    else:
        assert "REDIS_PASSWORD" not in renv and "$(" not in url


def assert_store_password(r: Render, secret_rendered: bool):
    dep, pod, c, env = assert_oka_deployment(r)
    names = [e["name"] for e in c["env"]]
    assert names.index("REDIS_PASSWORD") < names.index("OKA_STORE"), "REDIS_PASSWORD must come before OKA_STORE ($(…) expansion)"
    ref = env["REDIS_PASSWORD"]["secretKeyRef"]
    if secret_rendered:
        sec = r.named("Secret", ref["name"])
        assert ref["key"] in sec["data"], f"Secret {ref['name']} has no {ref['key']}"


def assert_auth(r: Render, enabled: bool, secret=None, key="keys.txt", expect_keys=()):
    dep, pod, c, env = assert_oka_deployment(r)
    if not enabled:
        assert "OKA_API_KEYS_FILE" not in env
        return
    path = env["OKA_API_KEYS_FILE"]
    assert path.endswith("/" + key)
    mount = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
    assert mount and "subPath" not in mount[0], "the keys Secret must be a directory mount (so rotation works)"
    vol = [v for v in pod["volumes"] if v["name"] == mount[0]["name"]][0]
    name = vol["secret"]["secretName"]
    if secret:
        assert name == secret, f"keys Secret {name}, expected {secret}"
    else:
        data = r.named("Secret", name)["data"][key]
        import base64
        text = base64.b64decode(data).decode()
        for k in expect_keys:
            assert re.search(rf"^{re.escape(k)} \S+$", text, re.M), f"key {k} not in the keys file"
    for t in r.all("Pod"):   # the helm test pod, when tests.enabled
        assert "KEYS_FILE" in env_of(t["spec"]["containers"][0]), "the helm test pod does not get the keys"


def assert_tls(r: Render, enabled: bool):
    dep, pod, c, env = assert_oka_deployment(r)
    probes = [c[p]["httpGet"] for p in ("startupProbe", "livenessProbe", "readinessProbe")]
    if not enabled:
        assert "OKA_TLS_CERT" not in env
        assert all(p.get("scheme", "HTTP") == "HTTP" for p in probes), probes
        return
    for var in ("OKA_TLS_CERT", "OKA_TLS_KEY", "OKA_ADMIN_TLS_CERT", "OKA_ADMIN_TLS_KEY", "OKA_TLS_CLIENT_CA"):
        path = env[var]
        mount = [m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/")]
        assert mount and "subPath" not in mount[0], f"{var}: a directory mount (so renewals update in place)"
        vol = [v for v in pod["volumes"] if v["name"] == mount[0]["name"]][0]
        want = "oka-client-ca" if var == "OKA_TLS_CLIENT_CA" else "oka-tls"
        assert vol["secret"]["secretName"] == want, (var, vol)
    assert all(p["scheme"] == "HTTPS" for p in probes), probes
    import base64
    keys = base64.b64decode(r.named("Secret", [m for m in pod["volumes"] if m["name"] == "api-keys"][0]["secret"]["secretName"])["data"]["keys.txt"]).decode()
    assert re.search(r"^cert:spiffe://cluster.local/ns/ml/sa/ranker read$", keys, re.M), keys
    assert re.search(r"^cert:loader.ml.svc read,write$", keys, re.M), keys
    ann = r.one("Ingress")["metadata"]["annotations"]
    assert ann["alb.ingress.kubernetes.io/backend-protocol"] == "HTTPS", ann
    assert ann["alb.ingress.kubernetes.io/healthcheck-protocol"] == "HTTPS", ann


def assert_tracing(r: Render, on: bool):
    """Tracing's environment: none when off; on, the node's collector as the endpoint
    (the node IP defined before the variable that refers to it), the ratio, the pod as
    resource attributes."""
    _, _, c, env = assert_oka_deployment(r)
    if not on:
        assert not any(k.startswith("OTEL_") for k in env), env
        return
    names = [e["name"] for e in c["env"]]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://$(OKA_NODE_IP):4318", env
    assert names.index("OKA_NODE_IP") < names.index("OTEL_EXPORTER_OTLP_ENDPOINT"), names
    node_ip = [e for e in c["env"] if e["name"] == "OKA_NODE_IP"][0]
    assert node_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP", node_ip
    assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.05", env
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf", env
    assert "k8s.pod.name=$(OKA_POD_NAME)" in env["OTEL_RESOURCE_ATTRIBUTES"], env
    assert names.index("OKA_POD_NAME") < names.index("OTEL_RESOURCE_ATTRIBUTES"), names


def assert_checksums(r: Render, rollout: bool):
    ann = r.one("Deployment")["spec"]["template"]["metadata"].get("annotations") or {}
    has = any(k.startswith("checksum/") for k in ann)
    assert has == rollout, f"checksum annotations {'missing' if rollout else 'present'} (rolloutOnConfigChange={rollout})"


def assert_test_hook(r: Render):
    t = r.one("Pod")
    assert t["metadata"]["annotations"]["helm.sh/hook"] == "test"
    c = t["spec"]["containers"][0]
    script = c["args"][0]
    own = open(os.path.join(OKA, "files", "test-request.sh")).read()
    assert script.strip() == own.strip(), "the test pod's script differs from files/test-request.sh"
    env = env_of(c)
    svc = r.one("Deployment")["metadata"]["name"]
    assert env["OKA_URL"].startswith(f"http://{svc}."), f"the test targets {env['OKA_URL']}, not the Service {svc}"
    float(env["EXPECTED"]), float(env["MULTIPLIER"])


def assert_eks(r: Render, values):
    dep, pod, c, env = assert_oka_deployment(r, expect_workers=values["cpu"])
    assert env["OKA_PIN"] == "true", "EKS: pinning expected (static CPU manager)"
    aff = pod["affinity"]["podAntiAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in aff, "EKS: one Oka pod per node expected"
    assert pod["nodeSelector"] == {"workload-type": "oka"}
    ing = r.one("Ingress")
    a = ing["metadata"]["annotations"]
    p = "alb.ingress.kubernetes.io/"
    assert ing["spec"]["ingressClassName"] == "alb"
    assert a[p + "scheme"] == "internet-facing", a.get(p + "scheme")
    assert a[p + "target-type"] == "ip"
    assert a[p + "healthcheck-path"] == "/readyz"
    admin = listen_port(env["OKA_ADMIN_LISTEN"])
    assert a[p + "healthcheck-port"] == str(admin), f"health check port {a.get(p + 'healthcheck-port')} is not the admin port {admin}"
    assert re.fullmatch(r"idle_timeout\.timeout_seconds=\d+", a[p + "load-balancer-attributes"])
    m = re.fullmatch(r"deregistration_delay\.timeout_seconds=(\d+)", a[p + "target-group-attributes"])
    pre = int(env_of(c)["OKA_SHUTDOWN_DELAY_S"])
    assert m and int(m.group(1)) < pre, "the deregistration delay must be below the shutdown delay"
    assert int(a[p + "healthcheck-timeout-seconds"]) * 1000 > int(env["OKA_STORE_TIMEOUT_MS"])
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    svc = r.named("Service", backend["name"])
    assert backend["port"]["name"] in [x["name"] for x in svc["spec"]["ports"]]
    assert r.all("Job"), "EKS: the seed Job is missing"


def assert_seed_job(r: Render, count):
    job = r.one("Job")
    assert "post-install" in job["metadata"]["annotations"]["helm.sh/hook"]
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][:3] == ["source", "mock", "--once"]
    assert env_of(c)["OKA_STORE"] == env_of(container(r.one("Deployment")["spec"]["template"]["spec"], "oka"))["OKA_STORE"]
    cm = r.one("ConfigMap", "-seed")
    spec = yaml.safe_load(cm["data"]["seed-source.yaml"])
    assert spec["features"]["test_feature"]["source"]["mock"]["generate"]["count"] == count
    return spec


def assert_full_extras(r: Render):
    hpa = r.one("HorizontalPodAutoscaler")
    dep = r.one("Deployment")
    assert "replicas" not in dep["spec"], "replicas must be left to the HPA"
    assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    kinds = [m["type"] for m in hpa["spec"]["metrics"]]
    assert kinds == ["Resource", "Pods"], kinds
    assert r.one("PodDisruptionBudget")["spec"]["minAvailable"] == "50%"
    sm = r.one("ServiceMonitor")
    adm = [s for s in r.all("Service") if labels_match(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
    assert len(adm) == 1, f"the ServiceMonitor selects {len(adm)} Services"
    assert sm["spec"]["endpoints"][0]["port"] in [p["name"] for p in adm[0]["spec"]["ports"]]
    assert sm["spec"]["endpoints"][0]["path"] == "/metrics"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    nps = r.all("NetworkPolicy")
    assert len(nps) == 1 and {p["ports"][0]["port"] for p in nps[0]["spec"]["ingress"]} == {"http", "admin"}


def assert_kafka_source(r: Render):
    server = r.named("Deployment", "oka")
    dep = r.named("Deployment", "oka-kafka-source")
    assert dep["spec"]["replicas"] == 3, dep["spec"].get("replicas")
    roll = dep["spec"]["strategy"]["rollingUpdate"]
    assert (roll["maxSurge"], roll["maxUnavailable"]) == (0, 1), f"one consumer at a time: {roll}"
    pod = dep["spec"]["template"]["spec"]
    c = container(pod, "kafka-source")
    args = c["args"]
    assert args[:2] == ["source", "kafka"], args
    opts = [args[i + 1] for i, a in enumerate(args) if a == "--kafka-option"]
    for want in ("security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=oka",
                 "sasl.password=$(OKA_KAFKA_SECRET_OPTION_0)"):
        assert want in opts, f"--kafka-option {want} missing: {opts}"
    env = env_of(c)
    secret = env["OKA_KAFKA_SECRET_OPTION_0"]["secretKeyRef"]
    assert (secret["name"], secret["key"]) == ("kafka-credentials", "password"), secret
    assert env["OKA_KAFKA_BROKERS"] == "kafka-0.kafka:9092,kafka-1.kafka:9092"
    # Static membership named after the pod: a restarted container resumes at once.
    assert env["OKA_KAFKA_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}, env.get("OKA_KAFKA_INSTANCE_ID")
    sc = container(server["spec"]["template"]["spec"], "oka")
    senv = env_of(sc)
    for k in ("OKA_SPEC", "OKA_STORE", "OKA_STORE_KEY_PREFIX", "REDIS_PASSWORD"):
        assert env[k] == senv[k], f"{k}: the consumer has {env[k]!r}, the server {senv[k]!r}"
    spec_vol = lambda p: [v["configMap"]["name"] for v in p["volumes"] if v["name"] == "spec"]
    assert spec_vol(pod) == spec_vol(server["spec"]["template"]["spec"]), "not the server's spec ConfigMap"
    assert env["OKA_ADMIN_LISTEN"].endswith(":9123")
    port = [p for p in c["ports"] if p["name"] == "admin"][0]["containerPort"]
    assert port == 9123
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert pod["terminationGracePeriodSeconds"] == int(env["OKA_SHUTDOWN_TIMEOUT_S"]) + 10
    assert [i["name"] for i in pod.get("initContainers", [])] == ["wait-for-redis"]
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = r.named("Service", "oka-kafka-source")
    assert labels_match(svc["spec"]["selector"], pod_labels), "the admin Service does not select the consumers"
    assert not labels_match(svc["spec"]["selector"], server["spec"]["template"]["metadata"]["labels"]), \
        "the consumers' Service selects the server"
    sm = r.named("ServiceMonitor", "oka-kafka-source")
    assert labels_match(sm["spec"]["selector"]["matchLabels"], svc["metadata"]["labels"])
    assert sm["spec"]["endpoints"][0]["port"] == "admin" and sm["spec"]["endpoints"][0]["path"] == "/metrics"
    np = r.named("NetworkPolicy", "oka-kafka-source")
    assert labels_match(np["spec"]["podSelector"]["matchLabels"], pod_labels)
    assert [p["port"] for rule in np["spec"]["ingress"] for p in rule["ports"]] == ["admin"]
    redis_np = r.named("NetworkPolicy", "oka-redis")
    peers = [f["podSelector"]["matchLabels"] for rule in redis_np["spec"]["ingress"] for f in rule["from"]]
    assert any(labels_match(p, pod_labels) for p in peers), "the bundled Redis does not let the consumers in"


def metric_names_documented():
    text = open(os.path.join(ROOT, "docs", "metrics.md")).read()
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"`(oka_[a-z_]+)`", text)}


def assert_dashboard(r: Render):
    cm = r.one("ConfigMap", "-dashboard")
    assert cm["metadata"]["labels"].get("grafana_dashboard") == "1"
    dash = json.loads(cm["data"]["oka.json"])
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 15, f"only {len(exprs)} queries"
    used = set()
    for e in exprs:
        for m in re.findall(r"\b(oka_[a-z_]+)", e):
            used.add(re.sub(r"_(bucket|sum|count)$", "", m))
    documented = metric_names_documented()
    unknown = sorted(used - documented)
    assert not unknown, f"the dashboard uses metrics not in docs/metrics.md: {unknown}"
    unused = sorted(documented - used)
    assert not unused, f"metrics in docs/metrics.md without a panel: {unused}"
    return len(used)


# ------------------------------------------------------------------ locust assertions

def assert_locust(r: Render, mode: str, replicas: int, existing_cm=None, workload=SEED_WORKLOAD,
                  existing_workload=None):
    """`workload`: the file the workload ConfigMap must hold (as JSON), or "registry"."""
    cms = [c for c in r.all("ConfigMap") if not c["metadata"]["name"].endswith("-workload")]
    if existing_cm:
        assert not cms, "an existing ConfigMap must not be rendered"
        cm_name = existing_cm
    else:
        assert len(cms) == 1, f"expected one locust files ConfigMap, found {len(cms)}"
        cm = cms[0]
        cm_name = cm["metadata"]["name"]
        for fname in LOCUST_FILES:
            own = open(os.path.join(ROOT, "locust", fname)).read()
            assert cm["data"][fname] == own, f"ConfigMap {fname} differs from locust/{fname}"
    kind = "Job" if mode == "headless" else "Deployment"
    master = r.one(kind, "-master")
    worker = r.one(kind, "-worker")
    svc = r.one("Service")
    wpod = worker["spec"]["template"]["spec"]
    if mode == "headless":
        assert worker["spec"]["parallelism"] == replicas == worker["spec"]["completions"]
        menv = env_of(master["spec"]["template"]["spec"]["containers"][0])
        assert menv["EXPECT_WORKERS"] == str(replicas)
        assert "run.py" in master["spec"]["template"]["spec"]["containers"][0]["command"][2]
    else:
        assert worker["spec"]["replicas"] == replicas
        assert "web" in [p["name"] for p in svc["spec"]["ports"]]
    wargs = wpod["containers"][0]["args"]
    assert wargs[wargs.index("--master-host") + 1] == svc["metadata"]["name"], "workers do not point at the master Service"
    mport = [p for p in svc["spec"]["ports"] if p["name"] == "master"][0]["port"]
    assert wargs[wargs.index("--master-port") + 1] == str(mport)
    assert labels_match(svc["spec"]["selector"], master["spec"]["template"]["metadata"]["labels"])
    for d in (master, worker):
        vols = d["spec"]["template"]["spec"]["volumes"]
        assert any(v.get("configMap", {}).get("name") == cm_name for v in vols), f"{d['metadata']['name']} does not mount {cm_name}"
    assert_workload(r, mode, master, workload, existing_workload)
    return master, worker


def assert_workload(r: Render, mode: str, master, workload, existing_workload=None):
    """The master gets the workload (a JSON ConfigMap of the file, an existing ConfigMap,
    or the registry) as --oka-workload; the workers get it from the master."""
    wcms = [c for c in r.all("ConfigMap") if c["metadata"]["name"].endswith("-workload")]
    mspec = master["spec"]["template"]["spec"]
    mc = mspec["containers"][0]
    if mode == "headless":
        arg = env_of(mc)["WORKLOAD"]
        assert '--oka-workload "$WORKLOAD"' in mc["command"][2], "the master script does not pass --oka-workload"
    else:
        arg = mc["args"][mc["args"].index("--oka-workload") + 1]
    mounted = {v["name"]: v for v in mspec["volumes"]}
    if workload == "registry":
        assert not wcms, "registry mode must not render a workload ConfigMap"
        assert arg == "registry", arg
        assert "workload" not in mounted
        return
    if existing_workload:
        cm_name, key = existing_workload
        assert not wcms, "an existing workload ConfigMap must not be rendered"
    else:
        assert len(wcms) == 1, f"expected one workload ConfigMap, found {len(wcms)}"
        cm_name, key = wcms[0]["metadata"]["name"], "workload.json"
        got = json.loads(wcms[0]["data"]["workload.json"])
        want = yaml.safe_load(open(workload))
        assert got == want, f"the workload ConfigMap differs from {os.path.relpath(workload, ROOT)}: {got} != {want}"
    assert mounted["workload"]["configMap"]["name"] == cm_name, mounted.get("workload")
    mount = [m for m in mc["volumeMounts"] if m["name"] == "workload"]
    assert mount and arg == f"{mount[0]['mountPath']}/{key}", (arg, mount)
    assert master["spec"]["template"]["metadata"]["annotations"].get("checksum/workload"), "no checksum/workload"


def assert_seed_workload_default():
    """The chart's default workload.content is locust/workloads/seed.yaml, not a drifted copy."""
    values = yaml.safe_load(open(os.path.join(LOCUST, "values.yaml")))
    got = yaml.safe_load(values["workload"]["content"])
    want = yaml.safe_load(open(SEED_WORKLOAD))
    assert got == want, f"helm/oka-locust/values.yaml workload.content differs from locust/workloads/seed.yaml: {got} != {want}"


# ------------------------------------------------------------------ values documentation

def assert_values_documented(path):
    """Every leaf value has a comment right above it that starts with its dotted path
    (or a parent map carries one for its whole block)."""
    lines = open(path).read().splitlines()
    undocumented, stack = [], []   # stack of (indent, key, documented)
    block_indent = None
    for i, line in enumerate(lines):
        if block_indent is not None:
            if line.strip() == "" or len(line) - len(line.lstrip()) > block_indent:
                continue
            block_indent = None
        m = re.match(r"^(\s*)([A-Za-z][A-Za-z0-9]*):(.*)$", line)
        if not m:
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([s[1] for s in stack] + [key])
        j = i - 1
        comment = []
        while j >= 0 and lines[j].strip().startswith("#"):
            comment.insert(0, lines[j].strip())
            j -= 1
        documented = bool(comment) and comment[0].startswith(f"# {dotted} -- ")
        parent_doc = any(s[2] for s in stack)
        is_map_header = rest == "" and i + 1 < len(lines)
        if rest in ("|", "|-", ">", ">-"):
            block_indent = indent
            is_map_header = False
        if is_map_header:
            nxt = next((x for x in lines[i + 1:] if x.strip() and not x.strip().startswith("#")), "")
            is_map_header = (len(nxt) - len(nxt.lstrip())) > indent and not nxt.strip().startswith("- ")
        if not is_map_header and not documented and not parent_doc:
            undocumented.append(dotted)
        stack.append((indent, key, documented or parent_doc))
    assert not undocumented, f"{os.path.relpath(path, ROOT)}: undocumented values {undocumented}"


# ------------------------------------------------------------------ EKS ClusterConfig

def common_defaults():
    env = {}
    for m in re.finditer(r"^export (\w+)=\$\{\1:-(.*)\}$", open(os.path.join(EKS, "common.sh")).read(), re.M):
        env[m.group(1)] = string.Template(m.group(2)).substitute(env)
    return env


def assert_cluster_config():
    env = common_defaults()
    text = string.Template(open(os.path.join(EKS, "cluster.yaml")).read()).substitute(env)
    cfg = yaml.safe_load(text)
    assert cfg["apiVersion"] == "eksctl.io/v1alpha5" and cfg["kind"] == "ClusterConfig"
    assert re.fullmatch(r"1\.\d+", cfg["metadata"]["version"])
    assert cfg["iam"]["withOIDC"] is True
    sa = [s for s in cfg["iam"]["serviceAccounts"] if s["metadata"]["name"] == "aws-load-balancer-controller"]
    assert sa and sa[0]["metadata"]["namespace"] == "kube-system" and sa[0]["wellKnownPolicies"]["awsLoadBalancerController"] is True
    groups = {g["name"]: g for g in cfg.get("managedNodeGroups", []) + cfg.get("nodeGroups", [])}
    assert set(groups) == {"system", "oka", "redis", "locust"}, sorted(groups)
    oka = [g for g in cfg["nodeGroups"] if g["name"] == "oka"][0]
    kc = oka["kubeletExtraConfig"]
    assert kc["cpuManagerPolicy"] == "static"

    def cpu_m(q):
        return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)
    reserved = cpu_m(kc["kubeReserved"]["cpu"]) + cpu_m(kc["systemReserved"]["cpu"])
    assert reserved > 0, "the static CPU manager needs reserved CPU"
    values = yaml.safe_load(open(os.path.join(EKS, "oka-values.yaml")))
    vcpus = {"t3.medium": 2, "t3.large": 2, "t3.xlarge": 4, "c6i.large": 2, "c6i.xlarge": 4}[oka["instanceType"]]
    exclusive = vcpus - math.ceil(reserved / 1000)
    assert values["cpu"] <= exclusive, f"Oka asks {values['cpu']} CPUs, the node has {exclusive} exclusive"
    daemonsets_m = 250
    assert vcpus * 1000 - reserved >= values["cpu"] * 1000 + daemonsets_m, "the Oka pod and the DaemonSets do not fit"
    assert int(env["OKA_CPU"]) == values["cpu"], "common.sh OKA_CPU != oka-values.yaml cpu"
    for name, vals in (("oka", values), ("redis", values["redis"])):
        g = groups[name]
        assert vals["nodeSelector"].items() <= g["labels"].items(), f"{name}: nodeSelector does not match the node group's labels"
        for t in g["taints"]:
            assert any(x["key"] == t["key"] and x.get("value") == t["value"] and x["effect"] == t["effect"]
                       for x in vals["tolerations"]), f"{name}: no toleration for taint {t}"
    lv = yaml.safe_load(open(os.path.join(EKS, "locust-values.yaml")))
    for role in ("master", "workers"):
        assert lv[role]["nodeSelector"].items() <= groups["locust"]["labels"].items()
    assert "taints" not in groups["system"], "the system group must stay untainted (CoreDNS, controller, hooks)"
    for g in groups.values():
        assert g["instanceType"].startswith(("t3.", "t2.", "c6i.", "c7i.")), g["instanceType"]
    return len(groups)


def assert_scripts():
    scripts = [os.path.join(EKS, f) for f in sorted(os.listdir(EKS)) if f.endswith(".sh")]
    scripts += [os.path.join(ROOT, "helm", "ci_check.sh"), os.path.join(OKA, "files", "test-request.sh")]
    for s in scripts:
        r = run(["bash", "-n", s])
        assert r.returncode == 0, f"{s}: {r.stderr}"
    for s in [x for x in scripts if x.endswith(("up.sh", "deploy.sh", "loadtest.sh", "down.sh"))]:
        assert os.access(s, os.X_OK), f"{s} is not executable"
    if shutil.which("shellcheck"):
        r = run(["shellcheck", "-x", "-S", "warning"] + scripts, cwd=EKS)
        assert r.returncode == 0, r.stdout[-1500:]
    return len(scripts)


# ------------------------------------------------------------------ Dockerfile

def dockerfile_commands():
    import dockerfile   # the official (BuildKit) parser, from PyPI
    cmds = dockerfile.parse_file(os.path.join(ROOT, "Dockerfile"))
    args = {}
    for c in cmds:
        if c.cmd == "ARG" and "=" in c.value[0]:
            k, v = c.value[0].split("=", 1)
            args.setdefault(k, v)
    return cmds, args


def assert_dockerfile():
    cmds, args = dockerfile_commands()
    froms = [string.Template(c.value[0]).substitute(args) for c in cmds if c.cmd == "FROM"]
    assert froms == ["rust:1.95-bookworm", "debian:bookworm-slim"], f"stages {froms}"
    runtime = cmds[max(i for i, c in enumerate(cmds) if c.cmd == "FROM"):]
    build = [c for c in cmds[:cmds.index(runtime[0])] if c.cmd == "RUN"]
    assert any("cargo build --release --locked -p oka-cli" in c.value[0] for c in build), "no release build of oka-cli"
    by = {c.cmd: c for c in runtime}
    user = by["USER"].value[0].split(":")[0]
    assert user.isdigit() and int(user) > 0, f"USER {user}: numeric non-root expected (runAsNonRoot)"
    assert by["ENTRYPOINT"].json and list(by["ENTRYPOINT"].value) == ["tini", "--", "oka"], by["ENTRYPOINT"].value
    installs = " ".join(c.value[0] for c in runtime if c.cmd == "RUN")
    for package in ("python3", "tini"):
        assert f" {package}" in installs, f"the runtime image does not install {package} (Python UDFs, PID 1)"
    assert set(by["EXPOSE"].value) == {"1122", "9122"}
    assert by["HEALTHCHECK"].value[0] == "CMD" and "/healthz" in by["HEALTHCHECK"].value[1]
    # Oka's admin port defaults to loopback; the image must open it to the container's
    # addresses, or published ports and probes cannot reach it.
    env = {}
    for c in runtime:
        if c.cmd == "ENV":
            env.update(zip(c.value[::2], c.value[1::2]))
    assert env.get("OKA_ADMIN_LISTEN", "").startswith("0.0.0.0:"), f"image ENV {env}: OKA_ADMIN_LISTEN must be 0.0.0.0:<port>"
    assert any(c.cmd == "COPY" and "--from=build" in c.flags for c in runtime), "the binary is not copied from the build stage"
    # Every COPY source outside the build stage exists and is not excluded by .dockerignore.
    ignore = [x.strip() for x in open(os.path.join(ROOT, ".dockerignore")) if x.strip() and not x.startswith("#")]
    for x in ("target", ".git", "locust", "helm", "deploy"):
        assert x in ignore, f".dockerignore does not exclude {x}"
    for c in cmds:
        if c.cmd == "COPY" and not any(f.startswith("--from") for f in c.flags):
            for src in c.value[:-1]:
                if src == ".":
                    continue
                assert os.path.exists(os.path.join(ROOT, src)), f"COPY {src}: no such file"
                top = src.split("/")[0]
                assert top not in ignore and f"/{top}" not in ignore, f"COPY {src} is excluded by .dockerignore"
    for member in ("crates", "examples", "benches", "Cargo.toml", "Cargo.lock"):
        assert member not in ignore, f".dockerignore excludes {member}, which the workspace build needs"
    return by["HEALTHCHECK"].value[1]


# ------------------------------------------------------------------ live checks (local oka)

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class LocalOka:
    def __init__(self, binary, *extra):
        self.port, self.admin = free_port(), free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="oka-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [binary, "serve", "--demo", "--listen", f"127.0.0.1:{self.port}",
             "--admin-listen", f"127.0.0.1:{self.admin}", "--workers", "1", "--pin", "false", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise AssertionError("oka serve --demo did not get ready")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)


def live_test_script(binary, render: Render, keys_secret_render: Render | None):
    if not binary:
        raise Skip("no target/debug/oka (or --no-live)")
    t = render.one("Pod")
    env = {k: v for k, v in env_of(t["spec"]["containers"][0]).items() if isinstance(v, str)}
    script = t["spec"]["containers"][0]["args"][0]
    extra, keys_path = [], None
    if keys_secret_render is not None:
        import base64
        sec = [s for s in keys_secret_render.all("Secret") if "keys.txt" in s.get("data", {})][0]
        fd, keys_path = tempfile.mkstemp(prefix="oka-keys-")
        with os.fdopen(fd, "w") as f:
            f.write(base64.b64decode(sec["data"]["keys.txt"]).decode())
        extra = ["--api-keys-file", keys_path]
    oka = LocalOka(binary, *extra)
    try:
        env["OKA_URL"] = f"http://127.0.0.1:{oka.port}"
        env.pop("KEYS_FILE", None)
        if keys_path:
            env["KEYS_FILE"] = keys_path
        env["PATH"] = os.environ.get("PATH", "")
        r = run(["sh", "-c", script], env=env, timeout=120)
        assert r.returncode == 0 and r.stdout.count("ok ") == 2, (r.stdout + r.stderr)[-800:]
        if keys_path:   # and without the key the same request is refused
            env.pop("KEYS_FILE")
            body = '{"target_features":["simple_feature"],"keys":[{"id":"test-id-21"}]}'
            req = urllib.request.Request(env["OKA_URL"] + "/v1/features", data=body.encode(), method="POST")
            try:
                urllib.request.urlopen(req, timeout=5)
                raise AssertionError("a request without a key was answered")
            except urllib.error.HTTPError as e:
                assert e.code == 401, e.code
    finally:
        oka.stop()
        if keys_path:
            os.unlink(keys_path)


def live_healthcheck(binary):
    if not binary:
        raise Skip("no target/debug/oka (or --no-live)")
    cmd = assert_dockerfile()
    oka = LocalOka(binary)
    try:
        env = {"PATH": os.environ.get("PATH", ""), "OKA_ADMIN_LISTEN": f"127.0.0.1:{oka.admin}"}
        r = run(["sh", "-c", cmd], env=env, timeout=10)
        assert r.returncode == 0, f"HEALTHCHECK failed against a live oka: {r.stdout}{r.stderr}"
        env["OKA_ADMIN_LISTEN"] = f"127.0.0.1:{free_port()}"
        assert run(["sh", "-c", cmd], env=env, timeout=10).returncode != 0, "HEALTHCHECK passes with nothing listening"
    finally:
        oka.stop()


def local_process(render: Render, pod_spec, container_, root, overrides):
    """The container's args and environment as a local process would get them: env
    values with Kubernetes' $(VAR) expansion, Secret references read from the render,
    ConfigMap volumes written under `root` (their mount paths rewritten)."""
    import base64
    mounts = {}
    for m in container_.get("volumeMounts", []):
        vol = [v for v in pod_spec.get("volumes", []) if v["name"] == m["name"]][0]
        if "configMap" in vol:
            local = os.path.join(root, m["mountPath"].strip("/").replace("/", "_"))
            os.makedirs(local, exist_ok=True)
            for k, v in render.named("ConfigMap", vol["configMap"]["name"])["data"].items():
                open(os.path.join(local, k), "w").write(v)
            mounts[m["mountPath"]] = local

    def paths(v):
        for mp, local in mounts.items():
            v = v.replace(mp + "/", local + "/")
        return v
    env = {}
    for e in container_.get("env") or []:
        if "value" in e:
            env[e["name"]] = paths(re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"]))
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            env[e["name"]] = base64.b64decode(render.named("Secret", ref["name"])["data"][ref["key"]]).decode()
    env.update(overrides)
    env["PATH"] = os.environ.get("PATH", "")
    return [paths(a) for a in container_.get("args", [])], env


def live_redis_seed(binary, render: Render):
    """The redis values end to end on this machine: a password-protected redis-server
    for the bundled Redis, the seed hook Job's command, `oka serve` with the
    Deployment's args and environment, then the helm test script."""
    redis = shutil.which("redis-server")
    if not binary:
        raise Skip("no target/debug/oka (or --no-live)")
    if not redis:
        raise Skip("no redis-server")
    dep = render.one("Deployment")
    pod = dep["spec"]["template"]["spec"]
    oka_c = container(pod, "oka")
    job = render.one("Job")
    jpod = job["spec"]["template"]["spec"]
    rport, port, admin = free_port(), free_port(), free_port()
    host = render.one("StatefulSet")["metadata"]["name"]
    with tempfile.TemporaryDirectory() as d:
        _, denv = local_process(render, pod, oka_c, d, {})
        password = denv["REDIS_PASSWORD"]
        store = denv["OKA_STORE"]
        assert store == f"redis://:{password}@{host}:6379", f"OKA_STORE expands to {store!r}"
        store = store.replace(f"@{host}:6379", f"@127.0.0.1:{rport}")
        rs = subprocess.Popen([redis, "--port", str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--requirepass", password, "--dir", d], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs = [rs]
        try:
            time.sleep(0.3)
            args, env = local_process(render, jpod, jpod["containers"][0], d, {"OKA_STORE": store})
            r = run([binary] + args, env=env, timeout=60)
            assert r.returncode == 0, f"seed Job: {r.stdout}{r.stderr}"[-600:]
            args, env = local_process(render, pod, oka_c, d, {
                "OKA_STORE": store, "OKA_LISTEN": f"127.0.0.1:{port}", "OKA_ADMIN_LISTEN": f"127.0.0.1:{admin}",
                "OKA_PIN": "false"})
            log = open(os.path.join(d, "oka.log"), "w")
            srv = subprocess.Popen([binary] + args, env=env, stdout=log, stderr=subprocess.STDOUT)
            procs.append(srv)
            deadline = time.time() + 30
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    pass
                assert srv.poll() is None and time.time() < deadline, "oka serve did not get ready: " + open(log.name).read()[-600:]
                time.sleep(0.2)
            t = render.one("Pod")["spec"]["containers"][0]
            tenv = {k: v for k, v in env_of(t).items() if isinstance(v, str)}
            tenv.update(OKA_URL=f"http://127.0.0.1:{port}", PATH=os.environ.get("PATH", ""))
            r = run(["sh", "-c", t["args"][0]], env=tenv, timeout=120)
            assert r.returncode == 0 and r.stdout.count("ok ") == 2, (r.stdout + r.stderr)[-600:]
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def live_validate_specs(binary, renders):
    if not binary:
        raise Skip("no target/debug/oka (or --no-live)")
    n = 0
    with tempfile.TemporaryDirectory() as d:
        for r in renders:
            for cm in r.all("ConfigMap"):
                # Every key beside the others, as the pod mounts them: a spec's Python
                # modules are found next to it.
                folder = os.path.join(d, f"{r.name.replace('/', '-')}-{cm['metadata']['name']}")
                os.makedirs(folder, exist_ok=True)
                for key, text in cm.get("data", {}).items():
                    open(os.path.join(folder, key), "w").write(text)
                for key, text in cm.get("data", {}).items():
                    if not key.endswith(".yaml"):
                        continue
                    p = os.path.join(folder, key)
                    out = run([binary, "validate", "--spec", p])
                    assert out.returncode == 0, f"{r.name} {cm['metadata']['name']}/{key}: {out.stdout}{out.stderr}"
                    n += 1
    assert n >= 2, f"only {n} specs validated"
    return n


def live_locust(binary, render: Render):
    venv_py = os.path.join(ROOT, "locust", ".venv", "bin", "python")
    if not binary:
        raise Skip("no target/debug/oka (or --no-live)")
    if not os.path.exists(venv_py) or run([venv_py, "-c", "import locust"]).returncode != 0:
        raise Skip("no locust/.venv with locust (locust/ci_smoke.sh creates it)")
    master = render.one("Job", "-master")
    worker = render.one("Job", "-worker")
    mc = master["spec"]["template"]["spec"]["containers"][0]
    wc = worker["spec"]["template"]["spec"]["containers"][0]
    cm = render.one("ConfigMap", "-files")
    wcm = render.one("ConfigMap", "-workload")
    oka = LocalOka(binary)
    with tempfile.TemporaryDirectory() as d:
        files, results = os.path.join(d, "files"), os.path.join(d, "results")
        wdir = os.path.join(d, "workload")
        for x in (files, results, wdir):
            os.makedirs(x)
        for k, v in cm["data"].items():
            open(os.path.join(files, k), "w").write(v)
        for k, v in wcm["data"].items():
            open(os.path.join(wdir, k), "w").write(v)
        script = mc["command"][2].replace("/mnt/locust", files).replace("/results", results)
        mport = free_port()
        env = {k: v for k, v in env_of(mc).items()}
        env.update(TARGET_HOST=f"http://127.0.0.1:{oka.port}", ADMIN_URL=f"http://127.0.0.1:{oka.admin}",
                   MASTER_PORT=str(mport), KEEP_S="0", HOME=d, EXPECT_WORKERS="1",
                   WORKLOAD=env_of(mc)["WORKLOAD"].replace("/mnt/workload", wdir),
                   PATH=os.path.dirname(venv_py) + os.pathsep + os.environ.get("PATH", ""))
        try:
            # The rendered command and environment; a short ramp instead of run.args.
            short = ["--oka-shape", "step", "--oka-step-users", "2", "--oka-step-time", "3",
                     "--oka-max-users", "4", "--oka-user-rps", "5", "--oka-hold", "3"]
            m = subprocess.Popen(["sh", "-c", script, mc["command"][3]] + short, env=env, start_new_session=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            wargs = [a.replace("/mnt/locust", files) for a in wc["args"]]
            wargs[wargs.index("--master-host") + 1] = "127.0.0.1"
            wargs[wargs.index("--master-port") + 1] = str(mport)
            w = subprocess.Popen([os.path.join(os.path.dirname(venv_py), "locust")] + wargs, env=env,
                                 start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                mout, _ = m.communicate(timeout=90)
                wout, _ = w.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                outs = []
                for proc in (m, w):   # the shell, run.py and Locust: their own process groups
                    try:
                        os.killpg(proc.pid, 9)
                    except ProcessLookupError:
                        pass
                    outs.append((proc.communicate()[0] or "")[-600:])
                raise AssertionError(f"the Locust master or worker did not finish: master: {outs[0]} worker: {outs[1]}")
            assert m.returncode == 0, f"master exit {m.returncode}: {mout[-800:]}"
            assert w.returncode == 0, f"worker exit {w.returncode}: {wout[-400:]}"
            name = env["RUN_NAME"]
            res = json.load(open(os.path.join(results, name, "result.json")))
            checks = res["checks"]
            assert checks.get("requests_checked", 0) > 0, checks
            w = res["run_metadata"].get("workload") or {}
            assert w.get("name") == "seed" and w.get("origin") == env["WORKLOAD"], \
                f"the run did not use the chart's workload file: {w.get('name')} from {w.get('origin')}"
            assert checks.get("fields_checked", 0) >= checks["requests_checked"], checks
            assert open(os.path.join(results, name, "exit_code")).read().strip() == "0"
            assert os.path.exists(os.path.join(results, "DONE"))
            return checks["requests_checked"]
        finally:
            oka.stop()


# ------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helm", required=True)
    ap.add_argument("--kube-version", default="1.33.0")
    ap.add_argument("--oka", default=os.path.join(ROOT, "target", "debug", "oka"))
    ap.add_argument("--no-live", action="store_true", help="skip the checks that run a local oka")
    a = ap.parse_args()
    helm, kube = a.helm, a.kube_version
    binary = a.oka if (not a.no_live and os.access(a.oka, os.X_OK)) else None
    C = Checks()
    print(f"helm-check: {run([helm, 'version', '--short']).stdout.strip()}, Kubernetes {kube}")

    oka_cases = {
        "default": [],
        "redis": ["-f", os.path.join(OKA, "ci", "redis-values.yaml")],
        "auth": ["-f", os.path.join(OKA, "ci", "auth-values.yaml")],
        "existing": ["-f", os.path.join(OKA, "ci", "existing-values.yaml")],
        "eks": ["-f", os.path.join(EKS, "oka-values.yaml")],
        "kafka": ["-f", os.path.join(OKA, "ci", "kafka-values.yaml")],
        "tls": ["-f", os.path.join(OKA, "ci", "tls-values.yaml")],
        "python": ["-f", os.path.join(OKA, "ci", "python-values.yaml")],
    }
    eks_run = os.path.join(LOCUST, "ci", "eks-run-values.yaml")
    locust_cases = {
        "headless": SET_FILES,
        "web": SET_FILES + ["-f", os.path.join(LOCUST, "ci", "web-values.yaml")],
        "eks": SET_FILES + ["-f", os.path.join(EKS, "locust-values.yaml"), "-f", eks_run],
        "existing-configmap": ["--set", "locustFiles.existingConfigMap=my-locust-files"],
        "workload-file": SET_FILES + ["--set-file", f"workload.content={PAYMENTS_WORKLOAD}"],
        "workload-existing": SET_FILES + ["--set", "workload.existingConfigMap=my-workload",
                                          "--set", "workload.existingConfigMapKey=payments.json"],
        "workload-registry": SET_FILES + ["-f", os.path.join(LOCUST, "ci", "web-values.yaml"),
                                          "--set", "workload.registry=true"],
    }
    R = {}
    for chart, cases, prefix in ((OKA, oka_cases, "oka"), (LOCUST, locust_cases, "locust")):
        for case, args in cases.items():
            name = f"{prefix}/{case}"
            C.check(f"{name}: helm lint --strict", helm_lint, helm, kube, chart, args)
            text = C.check(f"{name}: helm template", helm_template, helm, kube, chart, prefix, prefix, args)
            if text is None:
                continue
            R[name] = Render(name, text)
            res = C.check(f"{name}: kubernetes-validate {kube} (strict)", validate_k8s, R[name], kube)
            if res and res[1]:
                print(f"     ({res[0]} objects validated; {res[1]} CRD object(s) checked by hand below)")
            C.check(f"{name}: standard labels", assert_standard_labels, R[name])
            C.check(f"{name}: images pinned", assert_images_pinned, R[name])

    def has(*names):
        missing = [n for n in names if n not in R]
        if missing:
            raise AssertionError(f"no render of {missing}")
        return [R[n] for n in names]

    # oka
    eks_values = yaml.safe_load(open(os.path.join(EKS, "oka-values.yaml")))
    for case, workers in (("default", 2), ("redis", 1), ("auth", 4), ("existing", 2), ("eks", eks_values["cpu"])):
        C.check(f"oka/{case}: Guaranteed QoS, whole CPUs, OKA_WORKERS = CPUs ({workers}), probes, delay/grace",
                lambda c=case, w=workers: assert_oka_deployment(*has(f"oka/{c}"), expect_workers=w))
    C.check("oka/default: demo spec (--demo), memory store, no Redis, auth off",
            lambda: (assert_spec_source(*has("oka/default"), demo=True), assert_redis(R["oka/default"], False),
                     assert_auth(R["oka/default"], False)))
    C.check("oka/redis: spec ConfigMap mounted as a directory and used as OKA_SPEC",
            lambda: assert_spec_source(*has("oka/redis"), demo=False))
    C.check("oka/python: Python UDF modules beside the spec, OKA_PYTHON_* from python.*; none by default",
            lambda: assert_python(*has("oka/python"), R["oka/default"]))
    C.check("oka/existing: existing spec ConfigMap and key",
            lambda: assert_spec_source(*has("oka/existing"), demo=False, cm_name="my-features", cm_key="features.yaml"))
    C.check("oka/redis: bundled Redis StatefulSet with a generated password, wait-for-redis",
            lambda: (assert_redis(*has("oka/redis"), True), assert_store_password(R["oka/redis"], True)))
    C.check("oka/existing: bundled Redis without a password, with a PVC",
            lambda: (assert_redis(*has("oka/existing"), True, password=False),
                     R["oka/existing"].one("StatefulSet")["spec"]["volumeClaimTemplates"]))
    C.check("oka/auth + oka/eks: no/with Redis StatefulSet as configured",
            lambda: (assert_redis(*has("oka/auth"), False), assert_redis(R["oka/eks"], True)))
    C.check("oka/auth: external rediss:// with user and password from the chart's Secret",
            lambda: (assert_store_password(*has("oka/auth"), True),
                     expect(env_of(container(R["oka/auth"].one("Deployment")["spec"]["template"]["spec"], "oka"))["OKA_STORE"]
                            == "rediss://oka:$(REDIS_PASSWORD)@redis.example.internal:6380/0", "OKA_STORE")))
    C.check("oka/auth: API keys Secret mounted as a directory, OKA_API_KEYS_FILE, test pod gets the keys",
            lambda: assert_auth(*has("oka/auth"), True, expect_keys=("reader-0123456789abcdef", "ingester-0123456789abcdef")))
    C.check("oka/existing: API keys from an existing Secret",
            lambda: assert_auth(*has("oka/existing"), True, secret="my-oka-keys", key="keys"))
    C.check("oka/tls: HTTPS on both ports from the TLS Secret (directory mounts), mutual TLS CA, "
            "certificate identities in the keys file, HTTPS probes, ALB re-encrypting with HTTPS health checks",
            lambda: (assert_tls(*has("oka/tls"), True), assert_tls(R["oka/default"], False)))
    C.check("tracing: the node's collector, the ratio, the pod's name; none when off",
            lambda: (assert_tracing(*has("oka/tls"), True), assert_tracing(R["oka/default"], False)))
    C.check("oka/redis + oka/auth: checksum rollout on config change, and its opt-out",
            lambda: (assert_checksums(*has("oka/redis"), True), assert_checksums(R["oka/auth"], False)))
    C.check("oka/auth: HPA (CPU + Pods metric), PDB, ServiceMonitor on the admin Service, NetworkPolicy",
            lambda: assert_full_extras(*has("oka/auth")))
    C.check("oka/eks: ALB Ingress (internet-facing, target-type ip, /readyz on the admin port, "
            "idle timeout, deregistration < shutdown delay), pinned, one pod per node",
            lambda: assert_eks(*has("oka/eks"), eks_values))
    C.check("oka/kafka: `oka source kafka` Deployment (3 consumers, one at a time) from the server's spec "
            "ConfigMap and store, options and a Secret option as --kafka-option, probes, grace; its admin "
            "Service, ServiceMonitor and NetworkPolicy; the bundled Redis lets it in",
            lambda: assert_kafka_source(*has("oka/kafka")))
    seed = C.check("oka/redis: seed hook Job writes test_feature into the same store",
                   lambda: assert_seed_job(*has("oka/redis"), 10000))
    C.check("oka/default: helm test pod runs files/test-request.sh against the Service",
            lambda: assert_test_hook(*has("oka/default")))
    n = C.check("oka/auth: Grafana dashboard ConfigMap uses exactly the metrics of docs/metrics.md",
                lambda: assert_dashboard(*has("oka/auth")))
    if n:
        print(f"     ({n} metric families)")
    # locust
    C.check("locust/headless: master Job (run.py) + worker Job, ConfigMap = locust/*.py byte for byte",
            lambda: assert_locust(*has("locust/headless"), "headless", 2))
    C.check("locust/web: master + 3 worker Deployments, web port",
            lambda: assert_locust(*has("locust/web"), "web", 3))
    C.check("locust/eks: on the locust node group, pointed at the ALB",
            lambda: (assert_locust(*has("locust/eks"), "headless", 6),
                     expect(R["locust/eks"].one("Job", "-worker")["spec"]["template"]["spec"]["nodeSelector"]
                            == {"workload-type": "locust"}, "workers are not on the locust node group")))
    C.check("locust/existing-configmap: no ConfigMap rendered, the existing one mounted",
            lambda: assert_locust(*has("locust/existing-configmap"), "headless", 2, existing_cm="my-locust-files"))
    C.check("locust/workload-file: --set-file workload.content=examples/workloads/payments/workload.yaml "
            "→ its JSON in the workload ConfigMap, mounted on the master, --oka-workload",
            lambda: assert_locust(*has("locust/workload-file"), "headless", 2, workload=PAYMENTS_WORKLOAD))
    C.check("locust/workload-existing: the existing workload ConfigMap and key mounted, not rendered",
            lambda: assert_locust(*has("locust/workload-existing"), "headless", 2,
                                  existing_workload=("my-workload", "payments.json")))
    C.check("locust/workload-registry (web): --oka-workload registry, no workload ConfigMap",
            lambda: assert_locust(*has("locust/workload-registry"), "web", 3, workload="registry"))
    C.check("helm/oka-locust/values.yaml: the default workload.content is locust/workloads/seed.yaml",
            assert_seed_workload_default)

    # guard rails: renders that must fail
    def must_fail(chart, args, needle):
        r = run([helm, "template", "x", chart, "--kube-version", kube] + args)
        assert r.returncode != 0, "rendered, but should have been refused"
        assert needle in r.stderr, f"refused, but not with {needle!r}: {r.stderr.strip()[-300:]}"
    for what, chart, args, needle in (
        ("a fractional CPU", OKA, ["--set-json", "cpu=1.5"], "cpu"),
        ("image tag latest", OKA, ["--set", "image.tag=latest"], "tag"),
        ("auth without keys", OKA, ["--set", "auth.enabled=true"], "auth.apiKeys"),
        ("a short API key", OKA, ["--set", "auth.enabled=true", "--set-json", 'auth.apiKeys=[{"key":"short","scopes":["read"]}]'], "key"),
        ("a grace period below shutdown delay + grace", OKA, ["--set", "terminationGracePeriodSeconds=20"], "terminationGracePeriodSeconds"),
        ("seed data with the memory store", OKA, ["--set", "seedData.enabled=true"], "seedData"),
        ("a readiness timeout not above the store timeout", OKA, ["--set", "probes.readiness.timeoutSeconds=1"], "readiness"),
        ("a password with URL-unsafe characters", OKA, ["--set", "redis.enabled=true", "--set", "store.password=p@ss/word"], "password"),
        ("credentials inside store.url", OKA, ["--set", "store.url=redis://u:p@h:6379", "--set", "store.password=x"], "store.url"),
        ("an ALB deregistration delay not below the shutdown delay", OKA, ["-f", os.path.join(EKS, "oka-values.yaml"), "--set", "ingress.alb.deregistrationDelaySeconds=30"], "deregistration"),
        ("an unknown value (typo)", OKA, ["--set", "replicas=3"], "replicas"),
        ("TLS without its Secret", OKA, ["--set", "tls.enabled=true"], "tls.secretName is required"),
        ("an HTTPS backend without TLS on the pods", OKA, ["--set", "ingress.enabled=true", "--set", "ingress.alb.backendProtocol=HTTPS"], "needs tls.enabled"),
        ("the helm test under mutual TLS", OKA, ["--set", "tls.enabled=true", "--set", "tls.secretName=s", "--set", "tls.clientCaSecret=ca", "--set", "tests.enabled=true"], "tests.enabled=false"),
        ("the Kafka consumer with the demo spec", OKA, ["--set", "kafkaSource.enabled=true"], "kafkaSource.enabled needs a spec"),
        ("the Kafka consumer with the memory store", OKA, ["--set", "spec.demo=false", "--set", "kafkaSource.enabled=true"], "kafkaSource.enabled needs a shared store"),
        ("a Kafka option that is not a string", OKA, ["-f", os.path.join(OKA, "ci", "kafka-values.yaml"), "--set-json", 'kafkaSource.options={"fetch.max.bytes":1048576}'], "fetch.max.bytes"),
        ("the Locust chart without the locust files", LOCUST, [], "--set-file locustFiles.locustfile=locust/locustfile.py"),
        ("an empty workload", LOCUST, SET_FILES + ["--set", "workload.content="], "--set-file workload.content="),
        ("a workload that is not a mapping", LOCUST, SET_FILES + ["--set-json", 'workload.content="[a, b]"'], "workload.content is not a YAML or JSON mapping"),
        ("a workload key that YAML 1.1 reads as a boolean (a bare n)", LOCUST,
         SET_FILES + ["--set-json", 'workload.content="version: 1\\ntargets: [f]\\nquery_args: {f: {n: 3}}"'], "Quote such keys"),
        ("a workload without targets", LOCUST, SET_FILES + ["--set-json", 'workload.content="version: 1"'], "no `targets`"),
        ("registry mode with an existing workload ConfigMap", LOCUST,
         SET_FILES + ["--set", "workload.registry=true", "--set", "workload.existingConfigMap=w"], "workload.registry"),
    ):
        C.check(f"refuses {what}", must_fail, chart, args, needle)

    # documentation and deploy files
    C.check("helm/oka/values.yaml: every value documented by a comment starting with its path",
            assert_values_documented, os.path.join(OKA, "values.yaml"))
    C.check("helm/oka-locust/values.yaml: every value documented",
            assert_values_documented, os.path.join(LOCUST, "values.yaml"))
    n = C.check("deploy/eks/cluster.yaml: node groups, static CPU manager with reserved CPU, "
                "OIDC + ALB controller service account, taints/labels match the values",
                assert_cluster_config)
    C.check("deploy/eks/*.sh, helm/ci_check.sh, test-request.sh: bash -n, executable"
            + (", shellcheck" if shutil.which("shellcheck") else ""), assert_scripts)

    C.check("Dockerfile (BuildKit parser): rust:1.95-bookworm → bookworm-slim, release build, numeric "
            "non-root USER, ENTRYPOINT [oka], HEALTHCHECK, .dockerignore", assert_dockerfile)

    # live checks against a local oka
    C.check("live: oka validate of the rendered specs (chart spec, seed loader, Kafka spec)",
            lambda: live_validate_specs(binary, has("oka/redis", "oka/kafka")))
    C.check("live: the image's HEALTHCHECK command against oka serve (and failing with nothing listening)",
            lambda: live_healthcheck(binary))
    C.check("live: redis values end to end: password URL, seed Job, oka serve with the Deployment's env, helm test script",
            lambda: live_redis_seed(binary, *has("oka/redis")))
    C.check("live: helm test script against oka serve --demo",
            lambda: live_test_script(binary, *has("oka/default"), None))
    C.check("live: helm test script with the auth values' API keys (and 401 without)",
            lambda: live_test_script(binary, *has("oka/auth"), R["oka/auth"]))
    n = C.check("live: the Locust master Job's script (run.py) + one worker against oka serve --demo",
                lambda: live_locust(binary, *has("locust/headless")))
    if n:
        print(f"     ({n} requests checked)")

    tail = f", {C.skipped} skipped" if C.skipped else ""
    print(f"helm-check: {C.passed} passed, {C.failed} failed{tail}")
    return 1 if C.failed else 0


if __name__ == "__main__":
    sys.exit(main())
