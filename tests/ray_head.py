"""A real Ray head for the tests that run on a cluster by address (the sweep's and the campaign's).

``ray start --head --block`` on free ports, in its own session (so the whole family stops together)
and a short temporary directory (Ray's socket paths live there and have a length limit), with
token authentication pinned on: whether a cluster asks for a token depends on the Ray version and
the environment, and a driver without the head's token must be refused the same way on every
machine. `ray_head` yields the address and the environment a driver needs to join it.
The head is stopped by signalling its own process group (never ``ray stop``, which would stop
every Ray of this machine), so a failure leaves no Ray behind.
"""

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil

BIN = os.path.dirname(sys.executable)
START_S = 120  # seconds a head may take to answer before the test fails


def free_ports(n: int) -> list[int]:
    """`n` TCP ports free on 127.0.0.1 now."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def stop_head(head: subprocess.Popen, temp_dir: str) -> None:
    """SIGTERM the head's process group (Ray's graceful stop), then SIGKILL what is left of it."""
    family = []
    with contextlib.suppress(psutil.NoSuchProcess):
        family = psutil.Process(head.pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        head.wait(timeout=30)
    _, alive = psutil.wait_procs(family, timeout=15)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    head.wait(timeout=30)
    subprocess.run(["rm", "-rf", temp_dir], check=False)


@contextlib.contextmanager
def ray_head(prefix: str = "rh", **env_vars: str):
    """Start a Ray head with 2 CPUs, wait until its GCS answers, and stop it on exit.

    Args:
        prefix: of the head's temporary directory (under /tmp; removed when it stops).
        **env_vars: more variables of the head's (and the drivers') environment.

    Yields:
        (address ``127.0.0.1:PORT``, the environment of a driver that joins it: without the
        caller's ``RAY_ADDRESS`` / ``RAY_AUTH_*``, with the head's token, the head's process).
    """
    from jaxrl_agents.sweep.driver import probe_address

    gcs, agent, metrics = free_ports(3)
    temp_dir = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", JAX_PLATFORMS="cpu", RAY_AUTH_MODE="token",
               RAY_AUTH_TOKEN=secrets.token_hex(32), **env_vars)
    head = subprocess.Popen(
        [os.path.join(BIN, "ray"), "start", "--head", f"--port={gcs}", "--num-cpus=2",
         f"--temp-dir={temp_dir}", "--include-dashboard=false",
         f"--dashboard-agent-listen-port={agent}", f"--metrics-export-port={metrics}",
         "--disable-usage-stats", "--block"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    address = f"127.0.0.1:{gcs}"
    try:
        deadline = time.monotonic() + START_S
        while True:  # the GCS answers once the head is up
            assert head.poll() is None, head.stderr.read().decode()[-2000:]
            try:
                probe_address(address, timeout=1.0)
                break
            except ConnectionError:
                assert time.monotonic() < deadline, f"the Ray head did not start within {START_S} s"
                time.sleep(0.5)
        yield address, env, head
    finally:
        stop_head(head, temp_dir)
    assert not os.path.exists(temp_dir)
