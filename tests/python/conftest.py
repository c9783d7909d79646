"""The Kubernetes Python client against kube-gc's simulated API server, with `kube-gc run` collecting.

One session starts `kube-gc sim-apiserver` on a free loopback port (writing a kubeconfig) and
`kube-gc run` against it, waits until the collector's `/readyz` answers 200, and stops both at the
end. Every test gets a fresh namespace of its own. The binary is `$KUBE_GC_BIN` (default
`target/debug/kube-gc` under the repository root).
"""

import os
import pathlib
import re
import subprocess
import urllib.error
import urllib.request
import uuid

import pytest
from kubernetes import client, config

from support import STARTUP, eventually

REPO = pathlib.Path(__file__).resolve().parents[2]


def kube_gc_binary():
    path = pathlib.Path(os.environ.get("KUBE_GC_BIN", REPO / "target" / "debug" / "kube-gc"))
    if not path.is_file():
        pytest.exit(f"no kube-gc binary at {path}: build it (cargo build) or set KUBE_GC_BIN", returncode=2)
    return path


class Process:
    """A kube-gc subcommand whose stderr goes to a file, killed if it outlives `stop`."""

    def __init__(self, args, log):
        self.args = args
        self.log_path = log
        self.log_file = open(log, "wb")
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log_file,
            env={**os.environ, "RUST_LOG": "warn"},
        )

    def log(self):
        return self.log_path.read_text(errors="replace")

    def address(self, needle):
        """The `HOST:PORT` of the first stderr line holding `needle` and an http:// address."""

        def line():
            if self.process.poll() is not None:
                raise AssertionError(f"{self.args} exited ({self.process.returncode}):\n{self.log()}")
            for text in self.log().splitlines():
                if needle in text:
                    found = re.search(r"http://(\S+)", text)
                    if found:
                        return found.group(1)
            return None

        return eventually(line, STARTUP, what=f"{self.args[1]} to print {needle!r}")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self.log_file.close()


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Cluster:
    """The two processes and a client configured from the kubeconfig the server wrote."""

    def __init__(self, server, collector, collector_addr, api_client):
        self.server = server
        self.collector = collector
        self.collector_addr = collector_addr
        self.api_client = api_client

    def check_running(self):
        for process in (self.server, self.collector):
            code = process.process.poll()
            assert code is None, f"{process.args[1]} exited ({code}):\n{process.log()}"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    binary = str(kube_gc_binary())
    tmp = tmp_path_factory.mktemp("kube-gc")
    kubeconfig = tmp / "kubeconfig"
    server = Process(
        [binary, "sim-apiserver", "--listen", "127.0.0.1:0", "--write-kubeconfig", str(kubeconfig)],
        tmp / "sim-apiserver.log",
    )
    collector = None
    try:
        # The "serving" line follows the kubeconfig's write.
        server.address("serving")
        collector = Process(
            [binary, "run", "--kubeconfig", str(kubeconfig), "--secure-port", "0", "--insecure-bind-address", "127.0.0.1:0"],
            tmp / "kube-gc-run.log",
        )
        collector_addr = collector.address("serving /healthz")
        eventually(
            lambda: http_status(f"http://{collector_addr}/readyz") == 200,
            STARTUP,
            what="the collector's /readyz to answer 200",
        )
        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        with client.ApiClient(configuration) as api_client:
            cluster = Cluster(server, collector, collector_addr, api_client)
            yield cluster
            cluster.check_running()
    finally:
        if collector is not None:
            collector.stop()
        server.stop()


@pytest.fixture
def api_client(cluster):
    return cluster.api_client


@pytest.fixture
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client):
    return client.AppsV1Api(api_client)


@pytest.fixture
def namespace(request, core):
    """A fresh namespace named after the test, deleted (without waiting) afterwards."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    created = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    assert created.metadata.name == name
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as e:
        if e.status != 404:
            raise
