"""vLLM on the CPU with the tiny random Qwen2-VL, through StateLab's VLLMBackend.

    bash .ci/setup-vllm && .venv-vllm/bin/python -m inference.testing.tiny_vlm var/tiny-vlm
    .venv-vllm/bin/python bench/bench_vllm_cpu.py [var/tiny-vlm] [--batch 8] [--rounds 5]

Times `import vllm`, the engine start (in-process, eager, no torch.compile: the test tier's
mode), a batch of two-image chats (first and later rounds), the same batch with the option
letters constrained, and a frames-as-video query; prints peak RSS of this process. The model's
answers are noise; only the timings mean something. Not a test.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

for name, value in {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TORCHDYNAMO_DISABLE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_NO_USAGE_STATS": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}.items():
    os.environ.setdefault(name, value)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from inference.backends.base import ModelQuery, Sampling  # noqa: E402
from inference.backends.vllm_backend import VLLMBackend, engine_stats, shutdown_engine  # noqa: E402

OPTIONS = {
    "dtype": "bfloat16",
    "max_model_len": 512,
    "max_num_seqs": 16,
    "max_num_batched_tokens": 2048,
    "limit_mm_per_prompt": {"image": 4, "video": 1},
    "kv_cache_memory_bytes": 64 * 2**20,
    "enforce_eager": True,
    "distributed_executor_backend": "uni",
}


def data_url(rng, w: int, h: int) -> str:
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="var/tiny-vlm")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    chats = [
        ModelQuery(
            key=f"q{i}",
            max_tokens=5,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": data_url(rng, 64 + 8 * i, 80)}},
                        {"type": "image_url", "image_url": {"url": data_url(rng, 100, 56 + 8 * i)}},
                        {"type": "text", "text": f"Which action changes the first photo into the second? ({i})"},
                    ],
                }
            ],
        )
        for i in range(args.batch)
    ]
    lettered = [ModelQuery(key=q.key, messages=q.messages, choices=list("ABCD"), max_tokens=4) for q in chats]
    video = [
        ModelQuery(
            key="video",
            max_tokens=5,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "video_frames", "video_frames": [data_url(rng, 56, 56) for _ in range(8)]},
                        {"type": "text", "text": "Describe the change of state."},
                    ],
                }
            ],
        )
    ]
    sampling = Sampling(temperature=0.0, seed=0, logprobs=5)
    result: dict[str, float | int | str] = {"batch": args.batch}

    t0 = time.perf_counter()
    import vllm

    result["vllm"] = vllm.__version__
    result["import_vllm_s"] = round(time.perf_counter() - t0, 2)
    backend = VLLMBackend(OPTIONS, args.model, "")
    backend.llm
    result["engine_start_s"] = round(engine_stats()["start_seconds"], 2)

    def timed(queries) -> float:
        t = time.perf_counter()
        replies = backend.complete(queries, sampling)
        assert all(r.error is None for r in replies), [r.error for r in replies]
        return time.perf_counter() - t

    result["first_batch_s"] = round(timed(chats), 3)
    result["later_batch_median_s"] = round(statistics.median(timed(chats) for _ in range(args.rounds)), 3)
    result["choice_batch_median_s"] = round(statistics.median(timed(lettered) for _ in range(args.rounds)), 3)
    result["video_8_frames_s"] = round(timed(video), 3)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    result["load_average_1min"] = round(os.getloadavg()[0], 1)
    shutdown_engine()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
