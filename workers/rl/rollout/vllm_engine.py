"""VLLMEngine: rollouts with vLLM on a GPU, colocated with the trainer.

vLLM keeps its own copy of the weights, so after every training step `sync_weights` loads the
trainer's current parameters into it (no disk round trip), and `sleep`/`wake_up` free and restore
its KV cache and weights (sleep mode) while the trainer needs the GPU memory.

vLLM is optional: importing this module never fails; building the engine raises a clear error
when vLLM (or CUDA) is missing. Differences from HFEngine, by design of vLLM's API:
- a started `generate` call runs to completion: `should_abort` is only checked before it starts,
  so async mode aborts at call granularity;
- the reported logprobs are vLLM's "processed" logprobs (after temperature) where the installed
  version supports choosing them; the trainer recomputes old logprobs itself in any case.
"""

from __future__ import annotations

import importlib.util
import logging
import os

from workers.rl.rollout.base import (
    AbortPredicate,
    FinishCallback,
    GenerationOutput,
    GenerationRequest,
    SamplingParams,
)

log = logging.getLogger(__name__)


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


class VLLMUnavailable(RuntimeError):
    pass


def _inner_model(llm):
    """The torch module vLLM runs, when the engine lives in this process (paths vary by version)."""
    executor = llm.llm_engine.model_executor
    worker = getattr(executor, "driver_worker", None)
    for path in ("worker.model_runner.model", "model_runner.model"):
        obj = worker
        for attr in path.split("."):
            obj = getattr(obj, attr, None)
        if obj is not None:
            return obj
    return None


class VLLMEngine:
    def __init__(self, policy, tokenizer, model_dir, cfg, device):
        if not vllm_available():
            raise VLLMUnavailable("rollout.engine 'vllm' needs the vllm package (pip install -r requirements-gpu.txt)")
        import torch

        if not torch.cuda.is_available():
            raise VLLMUnavailable("rollout.engine 'vllm' needs a CUDA GPU")
        # Keep vLLM's engine in this process so its model can take our weights directly.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.policy = policy
        self.tokenizer = tokenizer
        self.cfg = cfg
        kwargs = dict(
            model=str(model_dir),
            tokenizer=str(model_dir),
            dtype=cfg.model.dtype,
            gpu_memory_utilization=cfg.rollout.gpu_memory_utilization,
            enable_sleep_mode=True,
            seed=cfg.seed,
            max_model_len=cfg.data.max_prompt_len + cfg.rollout.max_new_tokens,
        )
        try:
            self.llm = LLM(**kwargs, logprobs_mode="processed_logprobs")
        except TypeError:  # older vLLM: raw logprobs only
            self.llm = LLM(**kwargs)
        self.asleep = False
        self.eos_ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()

    def sleep(self) -> None:
        if not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def sync_weights(self) -> None:
        """Load the trainer's current parameters into vLLM's model."""
        weights = [(name, tensor.detach()) for name, tensor in self.policy.state_dict().items()]
        model = _inner_model(self.llm)
        if model is not None:
            model.load_weights(weights)
            return
        # Newer vLLM: run the load on its worker(s) through collective_rpc.
        self.llm.collective_rpc(lambda worker: worker.model_runner.model.load_weights(weights))

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        should_abort: AbortPredicate | None = None,
        on_finish: FinishCallback | None = None,
    ) -> list[GenerationOutput]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        if should_abort is not None and should_abort():
            return [GenerationOutput(finish_reason="abort") for _ in requests]
        self.wake_up()
        prompts = [TokensPrompt(prompt_token_ids=list(r.input_ids)) for r in requests]
        sampling = [
            VSamplingParams(
                n=1,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=max(1, min(r.max_new_tokens, params.max_new_tokens)),
                seed=int(r.seed % (2**31 - 1)),
                stop=list(r.stop_strings) or None,
                stop_token_ids=list(r.stop_token_ids) or None,
                include_stop_str_in_output=True,
                logprobs=0,
            )
            for r in requests
        ]
        results = self.llm.generate(prompts, sampling, use_tqdm=False)
        outputs = []
        for request, result in zip(requests, results):
            completion = result.outputs[0]
            token_ids = list(completion.token_ids)
            logprobs = []
            for token, entry in zip(token_ids, completion.logprobs or []):
                logprobs.append(float(entry[token].logprob) if entry and token in entry else 0.0)
            reason = "stop" if completion.finish_reason == "stop" else "length"
            stop = completion.stop_reason if completion.stop_reason is not None else (token_ids[-1] if token_ids and reason == "stop" else None)
            out = GenerationOutput(token_ids=token_ids, logprobs=logprobs, finish_reason=reason, stop=stop)
            outputs.append(out)
            if on_finish:
                on_finish(request, out)
        return outputs
