"""HFEngine: batched sampling with a transformers causal LM and its KV cache.

In colocated mode the engine holds the *same* module object as the trainer, so the weights it
samples with are always the trainer's current ones: weight sync is free (`sync_weights` is a
no-op). Prompts are left-padded into one batch; each decode step feeds one token per row.

Every row draws from its own `torch.Generator` (seeded by the request), using one uniform number
per generated token and inverse-CDF sampling. Hence a row's response depends on its seed and the
model only, not on its neighbours in the batch, the batch size or the chunking, which is what
makes rollouts reproducible across a resume. See rollout/base.py for the logprob convention.
"""

from __future__ import annotations

import logging

import torch

from workers.rl.rollout.base import (
    AbortPredicate,
    FinishCallback,
    GenerationOutput,
    GenerationRequest,
    SamplingParams,
)

log = logging.getLogger(__name__)


def eos_token_ids(model, tokenizer) -> set[int]:
    """Every id that ends a response: the tokenizer's eos and the model's generation config's."""
    ids: set[int] = set()
    for value in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def sampling_logprobs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """log-probabilities that rollout and trainer both use: float32, logits / T (T = 1 if greedy)."""
    scale = temperature if temperature > 0 else 1.0
    return torch.log_softmax(logits.float() / scale, dim=-1)


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail of each row outside the smallest set of tokens with mass >= top_p."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    # Keep a token if the mass before it is still below top_p (the first token is always kept).
    drop_sorted = (cumulative - sorted_probs) >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return probs.masked_fill(drop, 0.0)


class HFEngine:
    def __init__(self, model, tokenizer, device: str | torch.device = "cpu", max_batch_rows: int = 256):
        self.model = model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.max_batch_rows = max_batch_rows
        self.eos_ids = eos_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = next(iter(self.eos_ids), 0)
        self.pad_id = int(pad)

    # Colocated: the trainer updates these very parameters in place.
    def sync_weights(self) -> None:
        return None

    def sleep(self) -> None:
        return None

    def wake_up(self) -> None:
        return None

    def generate(
        self,
        requests: list[GenerationRequest],
        params: SamplingParams,
        should_abort: AbortPredicate | None = None,
        on_finish: FinishCallback | None = None,
    ) -> list[GenerationOutput]:
        outputs: list[GenerationOutput] = []
        aborted = False
        for start in range(0, len(requests), self.max_batch_rows):
            chunk = requests[start : start + self.max_batch_rows]
            if aborted:
                # Rows that never started are aborted with no tokens: a partial rollout restarts them.
                for req in chunk:
                    out = GenerationOutput(finish_reason="abort")
                    outputs.append(out)
                continue
            chunk_out, aborted = self._generate_chunk(chunk, params, should_abort, on_finish)
            outputs.extend(chunk_out)
        return outputs

    @torch.no_grad()
    def _generate_chunk(self, requests, params: SamplingParams, should_abort, on_finish):
        model = self.model
        was_training = model.training
        model.eval()
        try:
            return self._decode(requests, params, should_abort, on_finish)
        finally:
            model.train(was_training)

    def _decode(self, requests: list[GenerationRequest], params: SamplingParams, should_abort, on_finish):
        rows = len(requests)
        outputs = [GenerationOutput() for _ in requests]
        budgets = [min(r.max_new_tokens, params.max_new_tokens) if params.max_new_tokens else r.max_new_tokens for r in requests]
        finished = [b <= 0 for b in budgets]
        for i, done in enumerate(finished):
            if done:
                outputs[i].finish_reason = "length"
                if on_finish:
                    on_finish(requests[i], outputs[i])
        if all(finished):
            return outputs, False

        width = max(len(r.input_ids) for r in requests)
        input_ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((rows, width), dtype=torch.long)
        for i, req in enumerate(requests):
            if not req.input_ids:
                raise ValueError("a generation request needs at least one input token")
            input_ids[i, width - len(req.input_ids) :] = torch.tensor(req.input_ids, dtype=torch.long)
            attention[i, width - len(req.input_ids) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        input_ids, attention, positions = (t.to(self.device) for t in (input_ids, attention, positions))
        generators = [torch.Generator().manual_seed(int(r.seed) & 0xFFFF_FFFF_FFFF_FFFF) for r in requests]
        stop_ids = [self.eos_ids | set(r.stop_token_ids) for r in requests]
        tail_len = [max((len(s) for s in r.stop_strings), default=0) + 8 for r in requests]

        out = self.model(
            input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        cache = out.past_key_values
        logits = out.logits[:, -1, :]
        position = positions[:, -1:]
        steps = max(b for b, done in zip(budgets, finished) if not done)
        aborted = False
        for _ in range(steps):
            tokens, logps = self._sample(logits, params, generators, finished)
            token_list, logp_list = tokens.tolist(), logps.tolist()
            for i in range(rows):
                if finished[i]:
                    continue
                out_i = outputs[i]
                out_i.token_ids.append(token_list[i])
                out_i.logprobs.append(logp_list[i])
                reason = self._finish_reason(requests[i], out_i, stop_ids[i], tail_len[i], budgets[i])
                if reason:
                    out_i.finish_reason = reason
                    finished[i] = True
                    if on_finish:
                        on_finish(requests[i], out_i)
            if all(finished):
                break
            if should_abort is not None and should_abort():
                for i in range(rows):
                    if not finished[i]:
                        outputs[i].finish_reason = "abort"
                        finished[i] = True
                aborted = True
                break
            attention = torch.cat([attention, attention.new_ones((rows, 1))], dim=-1)
            position = position + 1
            out = self.model(
                input_ids=tokens[:, None].to(self.device),
                attention_mask=attention,
                position_ids=position,
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            logits = out.logits[:, -1, :]
        return outputs, aborted

    def _finish_reason(self, req: GenerationRequest, out: GenerationOutput, stop_ids, tail_len: int, budget: int):
        token = out.token_ids[-1]
        if token in stop_ids:
            out.stop = token
            return "stop"
        if req.stop_strings:
            tail = self.tokenizer.decode(out.token_ids[-tail_len:], skip_special_tokens=False)
            for s in req.stop_strings:
                if tail.endswith(s):
                    out.stop = s
                    return "stop"
        if len(out.token_ids) >= budget:
            return "length"
        return None

    @staticmethod
    def _sample(logits: torch.Tensor, params: SamplingParams, generators, finished):
        logp = sampling_logprobs(logits, params.temperature)
        if params.temperature <= 0:
            tokens = torch.argmax(logp, dim=-1)
        else:
            probs = top_p_filter(logp.exp(), params.top_p)
            cdf = torch.cumsum(probs, dim=-1)
            # One uniform per *active* row from that row's own stream: finished rows draw nothing.
            u = torch.tensor(
                [0.0 if done else float(torch.rand((), generator=g)) for g, done in zip(generators, finished)],
                dtype=cdf.dtype,
            ).to(cdf.device)
            target = u * cdf[:, -1]
            tokens = torch.searchsorted(cdf, target[:, None], right=True).squeeze(-1)
            tokens = tokens.clamp(max=cdf.shape[-1] - 1)
        picked = logp.gather(-1, tokens[:, None]).squeeze(-1)
        return tokens.cpu(), picked.cpu()
