"""Load test of capcal-api's HTTP client alone: requests/s and memory over up to 1,000,000 requests.

The server is a stand-in for a model: a minimal HTTP/1.1 server (asyncio, keep-alive) in its own process
that answers every POST at once with ``n`` fixed completions of ~170 characters. It measures the client
(``capcal_models.http_transport.HTTPTransport`` with the sample cache's ``BatchedWriter``, the code path of
``capcal-api``'s ``generate_until``), never a model.

Each run is a fresh client process: requests are built lazily by a generator (payload, SHA-256 cache key as
``capcal_models.sample_cache.request_key``, a cache look-up as on resume), sent ``--concurrency`` at once
and, with the cache on, their samples committed in batches to a new SQLite file. The client records requests/s
and its resident set size (VmRSS from /proc/self/status) at 10%, 20%, ..., 100% of the requests, plus its peak
(VmHWM). Flat memory = RSS at 100% close to RSS at 10%. Sizes: 1/10 (100,000) and full (1,000,000), cache on
and off; the load average is read before and after each run (the machine may be shared). ``--lm-eval-sizes``
also sends requests through ``capcal-api``'s ``generate_until`` (lm-eval Instances, sampling plan, payloads,
cache keys and look-ups of the real wrapper; its memory includes lm-eval's request and result lists).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/api_client_load.py  # 100k, 1M cache on+off; 100k lm-eval
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/api_client_load.py --sizes 100000 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "Question: What is 17 + 25? Show your reasoning step by step, then give the final answer. " * 2
ANSWER = "Let me add the numbers: 17 + 25 = 42. The tens give 30, the units 12, so 42 in all. " * 2


# --- the stand-in server (its own process) ----------------------------------------------------------------


class _Answer(asyncio.Protocol):
    """HTTP/1.1 keep-alive: each POST gets 200 with ``n`` choices (reads Content-Length bodies only)."""

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = json.loads(self.buffer[end + 4 : end + 4 + length])
            self.buffer = self.buffer[end + 4 + length :]
            seed = int(body.get("seed", 0))
            choices = [
                {"index": i, "text": f"{ANSWER}{seed + i}", "finish_reason": "stop"}
                for i in range(body.get("n", 1))
            ]
            answer = json.dumps({"object": "text_completion", "choices": choices}).encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % len(answer)
                + answer
            )


def serve(port: int) -> None:
    """Serve on 127.0.0.1:``port`` until killed; print "ready" once listening."""

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", port, backlog=1024)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- one client run (its own process) ---------------------------------------------------------------------


def _rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def client(url: str, requests: int, concurrency: int, cache_path: str | None, n: int) -> dict:
    """Send ``requests`` requests (``n`` samples each) through HTTPTransport; the figures as a dict."""
    sys.path.insert(0, str(ROOT))
    from capcal_models.http_transport import HTTPTransport, Job, RetryPolicy
    from capcal_models.sample_cache import SampleCache, request_key

    cache = SampleCache(cache_path) if cache_path else None
    writer = cache.writer() if cache is not None else None

    def parse(response: dict) -> list[str]:
        return [choice["text"] for choice in sorted(response["choices"], key=lambda c: c["index"])]

    def jobs():
        for i in range(requests):
            payload = {"model": "stand-in", "prompt": f"{PROMPT}{i}", "max_tokens": 64, "temperature": 1.0}
            key = request_key({"url": url, "request": payload, "run_seed": 1234, "question_id": str(i)})
            if cache is not None and cache.get(key):  # the look-up every request gets (resume)
                continue
            payload["seed"] = i
            if n > 1:
                payload["n"] = n
            yield Job(payload, parse, list(range(n)), task="load", question_id=str(i), tag=key)

    checkpoints = {requests * tenth // 10: f"{tenth * 10}%" for tenth in range(1, 11)}
    rss: dict[str, float] = {}
    received = [0]

    def store(job: Job, samples: dict[int, str]) -> None:
        if writer is not None:
            writer.put(job.tag, samples)
        received[0] += len(samples)

    done = [0]

    def on_done(job: Job) -> None:
        done[0] += 1
        if done[0] in checkpoints:
            rss[checkpoints[done[0]]] = _rss_kib() / 1024

    stats: dict = {}
    transport = HTTPTransport(url, concurrency=concurrency, retry=RetryPolicy(3, 0.1, 1.0), stats=stats)
    rss_start = _rss_kib() / 1024
    cpu_started = time.process_time()
    started = time.perf_counter()
    summary = transport.run(jobs(), on_received=store, on_done=on_done)
    if writer is not None:
        writer.close()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    rows = len(cache) if cache is not None else None
    return {
        "path": "transport",
        "requests": requests,
        "concurrency": concurrency,
        "samples_per_request": n,
        "cache": cache_path is not None,
        "seconds": elapsed,
        "requests_per_s": summary.jobs / elapsed,
        "client_cpu_s": cpu,
        "client_cpu_us_per_request": 1e6 * cpu / max(1, summary.jobs),
        "failed": len(summary.failed),
        "samples_received": received[0],
        "cache_rows": rows,
        "cache_commits": writer.commits if writer is not None else None,
        "retries": stats["retries"],
        "rss_start_mib": rss_start,
        "rss_mib": rss,
        "peak_rss_mib": _rss_kib("VmHWM") / 1024,
    }


def lm_eval_client(url: str, requests: int, concurrency: int, cache_path: str | None, n: int) -> dict:
    """The same load through ``capcal-api``'s ``generate_until`` (lm-eval Instances, the sampling plan, the
    payloads and cache keys of the real wrapper): its memory also holds lm-eval's request and result lists,
    which grow with the run. RSS is sampled every 20 ms and read at 10%, 50%, 100% of the samples received."""
    import threading

    sys.path.insert(0, str(ROOT))
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    from capcal_models.registry import register_models

    register_models()
    cache = f"cache_path={cache_path}" if cache_path else "sample_cache=False"
    lm = get_model("capcal-api").create_from_arg_string(
        f"model=stand-in,base_url={url},tokenizer_backend=none,num_concurrent={concurrency},seed=1234,"
        f"eos_string=<eos>,{cache}"
    )
    rss_start = _rss_kib() / 1024  # lm-eval and the wrapper imported
    gen_kwargs = {"do_sample": True, "temperature": 1.0, "until": ["\n\n"], "max_gen_toks": 64}
    instances = []
    for i in range(requests):
        arguments = (f"{PROMPT}{i}", gen_kwargs)
        instance = Instance(
            "generate_until", {"question_id": f"q{i}"}, arguments, idx=0, metadata=("load", i, n)
        )
        instances.extend([instance] * n)
    rss_requests_built = _rss_kib() / 1024
    rss: dict[str, float] = {}
    finished = threading.Event()

    def sample_rss() -> None:
        marks = [(requests * n * percent // 100, f"{percent}%") for percent in (10, 50, 100)]
        while marks and not finished.wait(0.02):
            while marks and lm.stats["samples_received"] >= marks[0][0]:
                rss[marks.pop(0)[1]] = _rss_kib() / 1024

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    cpu_started = time.process_time()
    started = time.perf_counter()
    texts = lm.generate_until(instances, disable_tqdm=True)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    finished.set()
    sampler.join()
    rss.setdefault("100%", _rss_kib() / 1024)  # read after the call (with its result list) if not before
    return {
        "path": "lm-eval",
        "requests": requests,
        "concurrency": concurrency,
        "samples_per_request": n,
        "cache": cache_path is not None,
        "seconds": elapsed,
        "requests_per_s": lm.stats["requests_needed"] / elapsed,
        "client_cpu_s": cpu,
        "client_cpu_us_per_request": 1e6 * cpu / max(1, lm.stats["requests_needed"]),
        "failed": lm.stats["failed_requests"],
        "samples_received": lm.stats["samples_received"],
        "results": len(texts),
        "retries": lm.stats["retries"],
        "rss_start_mib": rss_start,
        "rss_requests_built_mib": rss_requests_built,
        "rss_mib": rss,
        "peak_rss_mib": _rss_kib("VmHWM") / 1024,
    }


# --- the driver -------------------------------------------------------------------------------------------


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def run_one(url: str, path: str, requests: int, cache: bool, concurrency: int, n: int, scratch: Path) -> dict:
    """One client run in a fresh process; the load average before and after it."""
    cache_path = str(scratch / f"cache-{requests}.sqlite") if cache else ""
    command = [sys.executable, __file__, "--client", url, "--path", path, "--requests", str(requests)]
    command += ["--concurrency", str(concurrency), "--n", str(n), "--cache-path", cache_path]
    load_before = _load()
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    result.update(load_before=load_before, load_after=_load())
    if cache:
        for suffix in ("", "-wal", "-shm"):
            Path(cache_path + suffix).unlink(missing_ok=True)
    return result


def _line(result: dict) -> str:
    rss = result["rss_mib"]
    built = result.get("rss_requests_built_mib")
    return (
        f"{result['path']:>9} {result['requests']:>9,} requests, cache "
        f"{'on ' if result['cache'] else 'off'}: "
        f"{result['seconds']:7.1f} s, {result['requests_per_s']:6,.0f} requests/s, client CPU "
        f"{result['client_cpu_us_per_request']:.0f} us/request; RSS start {result['rss_start_mib']:.0f} MiB"
        + (f", lm-eval requests built {built:.0f}" if built else "")
        + f", 10% {rss['10%']:.0f}, 50% {rss['50%']:.0f}, 100% {rss['100%']:.0f}, peak "
        f"{result['peak_rss_mib']:.0f} MiB (100%/10% {rss['100%'] / rss['10%']:.3f}); failed "
        f"{result['failed']}, "
        f"cache rows {result.get('cache_rows')}, commits {result.get('cache_commits')}; load "
        f"{result['load_before']} -> {result['load_after']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="numbers of requests, comma-separated")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (num_concurrent)")
    parser.add_argument("--n", type=int, default=1, help="samples per request")
    parser.add_argument("--cache", default="on,off", help="on, off or on,off")
    parser.add_argument(
        "--lm-eval-sizes",
        default="100000",
        help="numbers of requests also sent through capcal-api's generate_until (cache on); '' for none",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--path", default="transport", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache-path", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.client is not None:
        run = lm_eval_client if args.path == "lm-eval" else client
        print(json.dumps(run(args.client, args.requests, args.concurrency, args.cache_path or None, args.n)))
        return 0

    sys.path.insert(0, str(ROOT / "tests" / "capcal_models"))
    from local_server import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
    )
    runs = [
        ("transport", int(size), mode == "on")
        for size in args.sizes.split(",")
        if size
        for mode in args.cache.split(",")
    ]
    runs += [("lm-eval", int(size), True) for size in args.lm_eval_sizes.split(",") if size]
    results = []
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}/v1/completions"
        print(f"nproc {os.cpu_count()}, load average {_load()}; stand-in server (pid {server.pid}) at {url}")
        print("a load test of the client alone: the server answers at once, no model runs")
        with tempfile.TemporaryDirectory(prefix="capcal-api-load-") as scratch:
            for path, requests, cache in runs:
                results.append(run_one(url, path, requests, cache, args.concurrency, args.n, Path(scratch)))
                print(_line(results[-1]), flush=True)
                if args.json:  # after each run, so that an interrupted benchmark keeps what it measured
                    args.json.write_text(json.dumps(results, indent=1))
    finally:
        server.kill()
        server.wait()
    transport_runs = [r for r in results if r["path"] == "transport"]
    sizes = sorted({r["requests"] for r in transport_runs})
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for cache in sorted({r["cache"] for r in transport_runs}, reverse=True):
            a = next(r for r in transport_runs if r["requests"] == small and r["cache"] == cache)
            b = next(r for r in transport_runs if r["requests"] == large and r["cache"] == cache)
            print(
                f"growth {small:,} -> {large:,} requests, cache {'on' if cache else 'off'}: time x"
                f"{b['seconds'] / a['seconds']:.2f} (requests x{large / small:.0f}), requests/s x"
                f"{b['requests_per_s'] / a['requests_per_s']:.2f}, peak RSS x"
                f"{b['peak_rss_mib'] / a['peak_rss_mib']:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
