"""Build a tiny Qwen2-VL checkpoint with random weights, fully offline and byte-reproducible.

The vLLM test tier runs the real engine against this model on the CPU: it has the architecture,
tokenizer, chat template and image/video processors of a real Qwen2-VL, but about 0.2 M
parameters, so an engine starts in seconds. Its answers are noise; tests assert structure,
determinism and constraint validity, never meaning.

    python -m inference.testing.tiny_vlm OUTDIR [--force]

Needs torch, transformers, tokenizers and a loadable torchvision (the Qwen2-VL processor and
its video processor require it): run it with .venv-vllm/bin/python. Nothing is downloaded.
The same inputs give the same bytes (weights, tokenizer, configs), checked by `digest()`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

# Bump when anything below changes the files; a folder built by another version is rebuilt.
BUILDER_VERSION = "statelab-tiny-qwen2vl-1"
MARKER = "statelab_tiny_vlm.json"
SEED = 20260101

BPE_SIZE = 480  # learned byte-level BPE tokens; special tokens come right after
VOCAB_ROWS = 512  # embedding rows, >= tokenizer size
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Qwen2-VL geometry: 14 px patches merged 2x2, so one LM token per 28x28 pixels. Images are scaled
# into [56x56, 112x112] pixels: 4 to 16 tokens each, which keeps prompts short.
PATCH, MERGE, TEMPORAL = 14, 2, 2
MIN_PIXELS, MAX_PIXELS = 56 * 56, 112 * 112
# Head size 32: vLLM's CPU attention kernels take 32, 64, 80, 96, 112, 128, ...
TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1)
VISION = dict(depth=1, embed_dim=32, hidden_size=64, mlp_ratio=2, num_heads=2, in_channels=3)
# With the usual 0.02 init the next-token distribution is flat and greedy picks hinge on tiny
# logit gaps that can flip between CPU kernels or dtypes; a wide lm_head makes them stable.
LM_HEAD_STD = 0.5

# The Qwen2-VL instruct template: system prompt by default, image and video placeholders.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Training text for the tokenizer: the vocabulary of the prompts StateLab sends.
CORPUS_LINES = (
    "You are a helpful assistant. Look at the images and answer the question.",
    "Image 1 shows the object before the action. Image 2 shows it after the action.",
    "Which option describes the change of state? Answer with the letter of one option only.",
    "Options: A. B. C. D. E. F. G. H. I. J. The answer is A. The answer is B.",
    "The apple is whole, then sliced. The door is closed, then open. The cup is empty, then full.",
    "How many objects changed state? Count them and answer with a number: 0 1 2 3 4 5 6 7 8 9 10.",
    "Frame 1, frame 2, frame 3 of the video before; frames of the video after.",
    "One answer is correct. Several answers may be correct. Select all that apply.",
    "Rate the video on each criterion from 1 to 5 and give evidence first, as JSON.",
    '{"evidence": "the lid is open", "score": 4} [ ] ( ) : ; , . ! ? - _ / < > = + * # % &',
    "red green blue yellow white black left right top bottom small large full empty open closed",
)
CORPUS = list(CORPUS_LINES) * 16


def build_tokenizer():
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    # Qwen2's split rule, then byte-level mapping: every byte is a token, so any text encodes.
    qwen2_split = (
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    )
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qwen2_split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_SIZE,
        min_frequency=1,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    bpe.train_from_iterator(CORPUS, trainer=trainer)
    learned = json.loads(bpe.to_str())["model"]
    vocab = dict(learned["vocab"])
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    for token in SPECIAL_TOKENS:  # after the learned vocabulary, as in real Qwen checkpoints
        vocab[token] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=4096,
    )
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    if len(tokenizer) > VOCAB_ROWS:
        raise RuntimeError(f"tokenizer has {len(tokenizer)} tokens, more than {VOCAB_ROWS} embedding rows")
    for token in SPECIAL_TOKENS:
        ids = tokenizer.encode(token, add_special_tokens=False)
        if ids != [tokenizer.convert_tokens_to_ids(token)]:
            raise RuntimeError(f"special token {token} encodes to {ids}")
    return tokenizer


def build(out_dir: str | os.PathLike, *, force: bool = False) -> Path:
    """Write the model into out_dir (created) and return it; a current build there is kept."""
    out = Path(out_dir)
    marker = out / MARKER
    if not force and marker.exists():
        try:
            if json.loads(marker.read_text()).get("builder") == BUILDER_VERSION:
                return out
        except ValueError:
            pass
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    tokenizer = build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    text_ids = dict(
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]
    )
    config = Qwen2VLConfig(
        text_config=dict(
            vocab_size=VOCAB_ROWS,
            max_position_embeddings=4096,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            # mrope sections split head_dim / 2 = 16 rotary pairs over (time, height, width).
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]},
            **TEXT,
            **text_ids,
        ),
        vision_config=dict(patch_size=PATCH, spatial_merge_size=MERGE, temporal_patch_size=TEMPORAL, **VISION),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        **text_ids,
    )
    model = Qwen2VLForConditionalGeneration(config)
    with torch.no_grad():
        model.lm_head.weight.normal_(mean=0.0, std=LM_HEAD_STD)
    model = model.to(torch.bfloat16).eval()
    model.generation_config.eos_token_id = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out, safe_serialization=True)

    geometry = dict(
        min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE
    )
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**geometry),
        video_processor=Qwen2VLVideoProcessor(**geometry),
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)
    tokenizer.save_pretrained(out)
    params = sum(p.numel() for p in model.parameters())
    marker.write_text(
        json.dumps(
            {"builder": BUILDER_VERSION, "seed": SEED, "parameters": params, "special_token_ids": ids},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    return out


def digest(out_dir: str | os.PathLike) -> dict[str, str]:
    """sha256 of every file in the folder, by relative path (to check byte reproducibility)."""
    root = Path(out_dir)
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the tiny random Qwen2-VL used by the vLLM test tier.")
    parser.add_argument("out_dir")
    parser.add_argument("--force", action="store_true", help="rebuild even if a current build is there")
    args = parser.parse_args(argv)
    out = build(args.out_dir, force=args.force)
    info = json.loads((out / MARKER).read_text())
    print(f"tiny Qwen2-VL in {out}: {info['parameters']} parameters, special token ids {info['special_token_ids']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
