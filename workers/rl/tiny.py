"""`builtin:tiny-arith`: a tiny causal LM that the project builds and warms up by itself.

The model is a 2-layer Llama (hidden 128, ~0.5M parameters) with a character-level tokenizer.
A short supervised phase on two-digit additions ("37+45=" -> "82<eos>") stops as soon as the
measured greedy accuracy on held-out problems reaches `target_accuracy` (checked every few
steps), which leaves RL room to improve it. The result is saved in Hugging Face format and loaded
through `from_pretrained(dir)` like any real checkpoint.

Building is cached under `<data dir>/models/tiny-arith-seed<seed>/` and safe when several
processes ask for it at once: one builds under a file lock into a temporary directory that is
atomically renamed into place; the others wait on the lock and then find it built.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

BUILTIN_PREFIX = "builtin:"
TINY_NAME = "tiny-arith"
DEFAULT_SEED = 0
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
# Printable ASCII and newline: enough for arithmetic prompts, tool calls and any plain template.
CHARACTERS = [chr(i) for i in range(32, 127)] + ["\n"]
ARCH = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4}
WARMUP = {
    "target_accuracy": 0.30,  # stop once held-out greedy accuracy reaches this (RL lifts it to ~55-60%)
    "batch_size": 128,
    "lr": 1e-3,
    "check_every": 10,  # steps between accuracy checks while far from the target
    # Near the target accuracy climbs ~15 points in 10 steps, and how fast depends on the CPU's
    # float kernels: from half the target on, check after every step so that every machine
    # stops just past the target, not anywhere up to 50%.
    "fine_check_from": 0.5,  # fraction of the target
    "check_problems": 256,
    "max_steps": 4000,
    "grad_clip": 1.0,
    "betas": (0.9, 0.98),
}
_MARKER = "tiny_arith.json"  # written last: a directory without it is not a finished build
RECIPE_VERSION = 2  # bump when the build changes in a way the recipe dict does not show


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    raw = os.environ.get("DATA_DIR") or os.environ.get("RLWEB_DATA_DIR")
    return Path(raw).expanduser().resolve() if raw else repo_root() / "var"


def tiny_model_dir(seed: int = DEFAULT_SEED) -> Path:
    return data_dir() / "models" / f"{TINY_NAME}-seed{seed}"


# --- tokenizer and model ---------------------------------------------------------------------


def build_tokenizer():
    """Character-level tokenizer as a PreTrainedTokenizerFast: '<bos>' is prepended to every
    encoded text, '<eos>' ends responses, '<pad>' pads (on the left, for generation)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in CHARACTERS:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token per character
    tok.decoder = decoders.Fuse()  # join characters back without spaces
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
    )


def build_model(tokenizer, seed: int):
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=256,
        num_key_value_heads=ARCH["num_attention_heads"],
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **ARCH,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    return model


# --- warm-up ---------------------------------------------------------------------------------


def greedy_accuracy(model, tokenizer, problems: list[tuple[int, int]]) -> float:
    """Fraction of problems whose greedy answer (up to eos) is exactly the sum."""
    from workers.rl import arith
    from workers.rl.rollout.base import GenerationRequest, SamplingParams
    from workers.rl.rollout.hf_engine import HFEngine

    engine = HFEngine(model, tokenizer)
    requests = [GenerationRequest(tokenizer(arith.prompt_of(a, b)).input_ids, max_new_tokens=4) for a, b in problems]
    outputs = engine.generate(requests, SamplingParams(temperature=0.0, max_new_tokens=4))
    right = 0
    for (a, b), out in zip(problems, outputs):
        text = tokenizer.decode(out.token_ids, skip_special_tokens=True)
        right += out.finish_reason == "stop" and text == str(a + b)
    return right / len(problems)


def _batch(tokenizer, problems: list[tuple[int, int]]):
    """Right-padded training batch; labels are -100 except on the answer and its eos."""
    import torch

    from workers.rl import arith

    seqs, labels = [], []
    for a, b in problems:
        prompt = tokenizer(arith.prompt_of(a, b)).input_ids
        answer = tokenizer(str(a + b), add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        seqs.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
    lab = torch.full((len(seqs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (s, l) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(l)] = torch.tensor(l)
        mask[i, : len(s)] = 1
    return ids, mask, lab


def warm_up(model, tokenizer, seed: int, target_accuracy: float | None = None, **overrides) -> dict:
    """Supervised training on train-pool additions until held-out greedy accuracy >= target."""
    import torch

    from workers.rl import arith

    cfg = {**WARMUP, **overrides}
    target = cfg["target_accuracy"] if target_accuracy is None else target_accuracy
    rng = random.Random(f"tiny-warmup:{seed}")
    train_pool = arith.pool("train")
    check = arith.pool("eval")[-cfg["check_problems"] :]
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=cfg["betas"], weight_decay=0.0)
    history = []
    accuracy = greedy_accuracy(model, tokenizer, check)
    step = 0
    while accuracy < target:
        if step >= cfg["max_steps"]:
            raise RuntimeError(f"tiny-arith warm-up reached only {accuracy:.0%} after {step} steps (target {target:.0%})")
        model.train()
        steps_to_check = 1 if accuracy >= cfg["fine_check_from"] * target else cfg["check_every"]
        for _ in range(steps_to_check):
            ids, mask, labels = _batch(tokenizer, rng.sample(train_pool, cfg["batch_size"]))
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
            optimizer.step()
            step += 1
        accuracy = greedy_accuracy(model, tokenizer, check)
        history.append({"step": step, "loss": round(float(loss.detach()), 4), "accuracy": accuracy})
        log.debug("tiny-arith warm-up step %d loss %.3f held-out accuracy %.3f", step, float(loss.detach()), accuracy)
    model.eval()
    return {"steps": step, "accuracy": accuracy, "target_accuracy": target, "history": history}


# --- build and cache -------------------------------------------------------------------------


def build_tiny_model(out_dir: Path, seed: int = DEFAULT_SEED, **warmup_overrides) -> dict:
    """Build, warm up and save the tiny model into `out_dir` (which must not exist yet)."""
    import torch

    started = time.monotonic()
    threads = torch.get_num_threads()
    # A fixed thread count keeps the float reductions, hence the build, the same on every machine.
    torch.set_num_threads(1)
    try:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer, seed)
        report = warm_up(model, tokenizer, seed, **warmup_overrides)
    finally:
        torch.set_num_threads(threads)
    out_dir.mkdir(parents=True)
    from workers.rl.modeling import quiet_transformers

    quiet_transformers()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {
        "name": TINY_NAME,
        "seed": seed,
        "recipe": recipe(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "build_seconds": round(time.monotonic() - started, 2),
        **report,
    }
    (out_dir / _MARKER).write_text(json.dumps(info, indent=2))
    return info


def recipe() -> dict:
    """Everything that shapes the built model: a cached build made from another recipe is rebuilt."""
    return {"version": RECIPE_VERSION, "arch": ARCH, "warmup": {k: list(v) if isinstance(v, tuple) else v for k, v in WARMUP.items()}, "characters": len(CHARACTERS)}


def is_built(path: Path) -> bool:
    marker = path / _MARKER
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("recipe") == recipe()
    except (OSError, ValueError):
        return False


def ensure_tiny_model(seed: int = DEFAULT_SEED, force: bool = False) -> Path:
    """The tiny model's directory, building it first if needed (once, even across processes)."""
    from filelock import FileLock

    target = tiny_model_dir(seed)
    if is_built(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if is_built(target) and not force:
            return target  # another process built it while we waited
        tmp = target.parent / f".{target.name}.building-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("building %s (seed %d) in %s", TINY_NAME, seed, target)
        info = build_tiny_model(tmp, seed)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)  # atomic: readers see no directory or a finished one
        log.info(
            "built %s: %d parameters, held-out greedy accuracy %.0f%% after %d warm-up steps (%.1f s)",
            TINY_NAME, info["parameters"], 100 * info["accuracy"], info["steps"], info["build_seconds"],
        )
    return target


def tiny_info(seed: int = DEFAULT_SEED) -> dict | None:
    path = tiny_model_dir(seed) / _MARKER
    return json.loads(path.read_text()) if path.is_file() else None
