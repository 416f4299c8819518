"""Real `python -m serving` processes for the fault tests.

Each server is a subprocess on a free loopback port, its log in a file, so a
test can read what it logged and kill it for real.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A `python -m serving` subprocess; `url`, `log_text()`, `stop()`."""

    def __init__(self, model_dir, log_path, *flags):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path)
        command = [
            sys.executable,
            "-m",
            "serving",
            "--model-dir",
            str(model_dir),
            "--port",
            str(self.port),
            *flags,
        ]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_ready(self, timeout_s=180):
        """Waits until the model status answers 200; raises with the log if not."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited:\n{self.log_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/models/headlines", timeout=5).is_success:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not ready:\n{self.log_text()[-3000:]}")

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        """Kills the server: how it shuts down is not what these tests check."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def listening_addresses(port):
    """IPv4 addresses listening on TCP `port`, read from /proc/net/tcp."""
    addresses = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
            octets = bytes.fromhex(address)[::-1]  # little-endian on x86
            addresses.add(".".join(str(b) for b in octets))
    return addresses
