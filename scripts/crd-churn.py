#!/usr/bin/env python3
"""CRD churn against `kube-gc sim-apiserver` while `kube-gc run` watches it.

Creates N CRDs over HTTP, waits until the collector monitors every one (kube_gc_monitors in its
/metrics), deletes them, waits until their monitors are gone, and prints the collector's monitors,
live tokio tasks (kube_gc_tasks) and resident memory (VmRSS of --pid) at the start and after each
phase. Only the Python standard library; the server has no authentication.

    scripts/crd-churn.py --server 127.0.0.1:6443 --collector 127.0.0.1:10258 --pid PID \
        --crds 1000 --cycles 5
"""

import argparse
import http.client
import json
import sys
import time

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd(i):
    plural = f"churns{i}"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.churn.example.com"},
        "spec": {
            "group": "churn.example.com",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": f"churn{i}", "kind": f"Churn{i}"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object",
                                                         "x-kubernetes-preserve-unknown-fields": True}}}],
        },
    }


def request(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    text = response.read()
    if response.status >= 300:
        sys.exit(f"{method} {path}: {response.status} {text[:200]!r}")
    return text


def metric(collector, name):
    conn = http.client.HTTPConnection(collector, timeout=30)
    conn.request("GET", "/metrics")
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    sys.exit(f"no {name} in /metrics")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    sys.exit(f"no VmRSS for pid {pid}")


def wait_for_monitors(collector, want, patience):
    deadline = time.monotonic() + patience
    while metric(collector, "kube_gc_monitors") != want:
        if time.monotonic() > deadline:
            sys.exit(f"kube_gc_monitors never reached {want}")
        time.sleep(0.5)


def row(label, args, started):
    monitors = metric(args.collector, "kube_gc_monitors")
    tasks = metric(args.collector, "kube_gc_tasks")
    print(f"| {label} | {time.monotonic() - started:.0f} s | {monitors} | {tasks} | {rss_kib(args.pid) / 1024:.1f} MiB |",
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="host:port of sim-apiserver")
    parser.add_argument("--collector", required=True, help="host:port of kube-gc run's plain endpoints (--insecure-bind-address)")
    parser.add_argument("--pid", required=True, type=int, help="kube-gc run's process id")
    parser.add_argument("--crds", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--patience", type=float, default=600, help="seconds to wait for the monitors")
    args = parser.parse_args()

    conn = http.client.HTTPConnection(args.server, timeout=30)
    base = metric(args.collector, "kube_gc_monitors")
    started = time.monotonic()
    print("| when | elapsed | monitors | tasks | kube-gc VmRSS |")
    print("|---|---|---|---|---|")
    row("start", args, started)
    for cycle in range(1, args.cycles + 1):
        for i in range(args.crds):
            request(conn, "POST", CRDS, crd(i))
        wait_for_monitors(args.collector, base + args.crds, args.patience)
        row(f"cycle {cycle}: {args.crds} CRDs monitored", args, started)
        for i in range(args.crds):
            request(conn, "DELETE", f"{CRDS}/churns{i}.churn.example.com")
        wait_for_monitors(args.collector, base, args.patience)
        time.sleep(2)  # the stopped monitors' tasks end once cancelled
        row(f"cycle {cycle}: deleted", args, started)


if __name__ == "__main__":
    main()
