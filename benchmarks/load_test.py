"""Closed-loop load test of a headline server speaking TF Serving's REST API.

`--concurrency` clients each send one `:predict` request, wait for the answer and
send the next, for `--duration` seconds. Reports throughput, latency
percentiles, errors, the server's batching counters (when it exposes
`/monitoring/stats`, as `serving` does) and the server's memory (RSS read
from `/proc/<pid>/status` at the start and the end; pass `--server-pid`).

Example:

```
python -m serving --model-dir saved_models/headlines &
python -m benchmarks.load_test --url http://127.0.0.1:8501 --server-pid $!
```

Only loopback URLs are accepted: this tool is for measuring a local server, not
for sending load to other machines.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import httpx

# Synthetic, Gigaword-styled sentences (lower-cased, `#` digits, split
# punctuation), written for this benchmark.
DEFAULT_DOCUMENTS = [
    "the city council approved a new budget on tuesday that raises spending on "
    "public transport by ## percent over the next two years .",
    "heavy rain caused flooding across the northern region , forcing hundreds of "
    "families to leave their homes , officials said on sunday .",
    "the central bank left its main interest rate unchanged at #.## percent , "
    "citing slowing growth and stable inflation .",
    "a local football club signed a young striker from a rival team for an "
    "undisclosed fee , the club announced friday .",
    "scientists reported that a new vaccine trial showed strong results in early "
    "tests involving more than #,### volunteers .",
    "the airline said it would add ## new routes next summer as travel demand "
    "continues to recover .",
    "police arrested two men suspected of stealing paintings from a museum last "
    "month , a spokesman said .",
    "the government unveiled a plan to build #,### new homes in the capital by "
    "#### to ease a housing shortage .",
]


def _loopback_only(url: str) -> str:
    host = urlparse(url).hostname
    if host is None:
        raise SystemExit(f"error: --url has no host: {url!r}")
    if host != "localhost":
        try:
            if ipaddress.ip_address(host).is_loopback:
                return url
        except ValueError:
            pass
        raise SystemExit(
            f"error: --url must point at a loopback address (127.0.0.1, ::1, "
            f"localhost), got host {host!r}"
        )
    return url


def _rss_kib(pid: int | None) -> dict[str, int] | None:
    """`VmRSS` and `VmHWM` (peak RSS) of `pid` in KiB, or None if unreadable."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        print(f"warning: cannot read memory of pid {pid}: {exc}", file=sys.stderr)
        return None
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending list; None when it is empty."""
    if not sorted_values:
        return None
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


async def _stats(http: httpx.AsyncClient) -> dict | None:
    try:
        resp = await http.get("/monitoring/stats")
    except httpx.HTTPError:
        return None
    return resp.json() if resp.status_code == 200 else None


def _documents(args: argparse.Namespace) -> list[str]:
    """`--documents-file`'s non-blank lines, or the built-in documents."""
    if not args.documents_file:
        return DEFAULT_DOCUMENTS
    documents = [
        line.strip()
        for line in Path(args.documents_file).read_text().splitlines()
        if line.strip()
    ]
    if not documents:
        raise SystemExit(f"error: no documents in {args.documents_file}")
    return documents


def _latency_ms(latencies: list[float]) -> dict[str, float | None]:
    """Percentiles, max and mean of ascending latencies (s), in ms."""
    ok = len(latencies)
    return {
        name: None if v is None else round(v * 1000, 2)
        for name, v in (
            ("p50", percentile(latencies, 50)),
            ("p95", percentile(latencies, 95)),
            ("p99", percentile(latencies, 99)),
            ("max", latencies[-1] if latencies else None),
            ("mean", sum(latencies) / ok if ok else None),
        )
    }


def _server_batching(stats_before: dict, stats_after: dict) -> dict:
    """The server's batching over the test, from its counters before and after."""
    batches = stats_after["batches"] - stats_before["batches"]
    instances = stats_after["instances"] - stats_before["instances"]
    return {
        "batches": batches,
        "mean_batch_size": round(instances / batches, 2) if batches else None,
        "max_batch_size_seen": stats_after.get("max_batch_size_seen"),
    }


class _Connection:
    """One client's keep-alive HTTP/1.1 connection, on asyncio's streams.

    The load loop does not use httpx: its per-request work, on the same
    cores as the server, was what limited the measured requests/s (the
    history of the served benchmarks in docs/history.md). A request here is a
    few bytes written and a response read by its Content-Length.
    """

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self._streams = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POSTs `body` as JSON; returns the status and the response body."""
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode("ascii")
            + body
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *header_lines = head.split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            data = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            data = await _read_chunked(reader)
        else:
            raise ConnectionError("a response with neither length nor chunks")
        if headers.get("connection", "").lower() == "close":
            self.close()
        return int(status_line.split()[1]), data

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        chunk = await reader.readexactly(size + 2)  # the data and its CRLF
        if size == 0:
            return b"".join(chunks)
        chunks.append(chunk[:-2])


async def _closed_loop(args, documents, path, end, record, index) -> None:
    """Client `index`: a request, its answer, the next, until `end`."""
    url = urlparse(args.url)
    connection = _Connection(url.hostname, url.port or 80)
    rng = random.Random(f"{args.seed}-{index}")
    try:
        while time.perf_counter() < end:
            body = {"instances": [rng.choice(documents) for _ in range(args.instances)]}
            if args.signature:
                body["signature_name"] = args.signature
            t0 = time.perf_counter()
            try:
                status, _ = await asyncio.wait_for(
                    connection.post(path, json.dumps(body).encode("utf-8")),
                    args.timeout,
                )
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                connection.close()  # a fresh connection for the next request
                record(None, type(exc).__name__)
                continue
            record(status, time.perf_counter() - t0)
    finally:
        connection.close()


async def run(args: argparse.Namespace) -> dict:
    """Runs the closed-loop load test of `args` and returns its report."""
    documents = _documents(args)
    path = f"/v1/models/{args.model_name}:predict"
    latencies: list[float] = []
    errors: Counter = Counter()
    statuses: Counter = Counter()

    def record(status, outcome):
        if status is None:
            errors[outcome] += 1
            return
        statuses[status] += 1
        if status == 200:
            latencies.append(outcome)
        else:
            errors[f"HTTP {status}"] += 1

    async with httpx.AsyncClient(base_url=args.url, timeout=args.timeout) as http:
        # One request first so a missing server or model fails fast and clearly.
        probe = await http.post(path, json={"instances": documents[:1]})
        if probe.status_code != 200:
            raise SystemExit(
                f"error: probe request got HTTP {probe.status_code}: {probe.text[:300]}"
            )
        stats_before = await _stats(http)
        rss_start = _rss_kib(args.server_pid)
        start = time.perf_counter()
        clients = [
            _closed_loop(args, documents, path, start + args.duration, record, i)
            for i in range(args.concurrency)
        ]
        await asyncio.gather(*clients)
        wall = time.perf_counter() - start
        rss_end = _rss_kib(args.server_pid)
        stats_after = await _stats(http)

    latencies.sort()
    ok = len(latencies)
    report = {
        "url": args.url,
        "concurrency": args.concurrency,
        "duration_s": round(wall, 3),
        "instances_per_request": args.instances,
        "requests_ok": ok,
        "errors": dict(errors),
        "status_codes": {str(k): v for k, v in sorted(statuses.items())},
        "throughput_rps": round(ok / wall, 2),
        "throughput_instances_per_s": round(ok * args.instances / wall, 2),
        "latency_ms": _latency_ms(latencies),
        "server_rss_kib": {"start": rss_start, "end": rss_end},
        # The load generator's own CPU time: it shares the machine.
        "client_cpu_s": round(time.process_time(), 2),
    }
    if stats_before and stats_after:
        report["server_batching"] = _server_batching(stats_before, stats_after)
    return report


def _print(report: dict) -> None:
    lat = report["latency_ms"]
    print(
        f"{report['requests_ok']} ok requests in {report['duration_s']} s with "
        f"{report['concurrency']} clients ({report['instances_per_request']} "
        "instance(s) each)"
    )
    print(
        f"throughput: {report['throughput_rps']} req/s, "
        f"{report['throughput_instances_per_s']} instances/s"
    )
    print(
        f"latency ms: p50 {lat['p50']}  p95 {lat['p95']}  p99 {lat['p99']}  "
        f"max {lat['max']}  mean {lat['mean']}"
    )
    print(f"errors: {report['errors'] or 'none'}")
    print(f"load generator CPU time: {report['client_cpu_s']} s")
    rss = report["server_rss_kib"]
    if rss["start"] and rss["end"]:
        print(
            f"server RSS: {rss['start']['VmRSS'] / 1024:.1f} MiB at start, "
            f"{rss['end']['VmRSS'] / 1024:.1f} MiB at end "
            f"(peak {rss['end']['VmHWM'] / 1024:.1f} MiB)"
        )
    if "server_batching" in report:
        b = report["server_batching"]
        print(
            f"server batching: {b['batches']} batches, mean size "
            f"{b['mean_batch_size']}, max {b['max_batch_size_seen']}"
        )


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8501", help="Loopback only.")
    p.add_argument("--model-name", default="headlines")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--duration", type=float, default=60.0, help="Seconds.")
    p.add_argument("--instances", type=int, default=1, help="Documents per request.")
    p.add_argument("--signature", default=None, help="signature_name to send.")
    p.add_argument("--documents-file", default=None, help="One document per line.")
    p.add_argument("--server-pid", type=int, default=None, help="For RSS readings.")
    p.add_argument("--timeout", type=float, default=60.0, help="Per request, s.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", default=None, help="Also write the report here.")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.duration <= 0 or args.instances < 1:
        p.error("--concurrency, --duration and --instances must be positive")
    _loopback_only(args.url)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    try:
        report = asyncio.run(run(args))
    except httpx.ConnectError as exc:
        raise SystemExit(f"error: cannot connect to {args.url}: {exc}") from None
    _print(report)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
