"""Agent loops: how one trajectory (one Sample) is built from model turns and tool results.

- `SingleTurnAgent`: one response to the prompt.
- `CalculatorAgent`: multi-turn. When the model writes `<calc>EXPR</calc>` the turn stops, the
  loop evaluates EXPR (plain arithmetic only, parsed, never executed as code) and appends
  `<result>VALUE</result>`; the model then continues. Tool tokens are part of the response but
  get mask 0 and logprob 0: the policy is trained on its own tokens only.

Both continue a sample that already has response tokens (an aborted partial rollout): the old
tokens, their logprobs and the sample's `policy_version` (that of its first token) are kept and
generation resumes after them with the current policy. `max_new_tokens` bounds the whole
response, tool tokens included.
"""

from __future__ import annotations

import ast
import math
import operator

from workers.rl.rollout.base import GenerationOutput, GenerationRequest, SamplingParams
from workers.rl.rollout.controller import RolloutController
from workers.rl.sample import Sample, SampleStatus
from workers.rl.seeding import derive_seed


class SingleTurnAgent:
    name = "single_turn"

    def __init__(self, controller: RolloutController, tokenizer, params: SamplingParams):
        self.controller = controller
        self.tokenizer = tokenizer
        self.params = params

    # --- shared mechanics ---------------------------------------------------------------------

    def _request(self, sample: Sample, stop_strings: tuple[str, ...] = ()) -> GenerationRequest:
        calls = int(sample.metadata.get("calls", 0))
        sample.metadata["calls"] = calls + 1
        return GenerationRequest(
            input_ids=list(sample.prompt_ids) + list(sample.response_ids),
            max_new_tokens=self.params.max_new_tokens - len(sample.response_ids),
            seed=derive_seed(sample.metadata.get("seed", 0), "call", calls),
            stop_strings=stop_strings,
            tag=sample,
        )

    @staticmethod
    def _append(sample: Sample, output: GenerationOutput) -> None:
        sample.response_ids.extend(output.token_ids)
        sample.logprobs.extend(output.logprobs)
        sample.response_mask.extend([1] * len(output.token_ids))

    def _finish(self, sample: Sample, reason: str) -> Sample:
        sample.finish_reason = reason
        sample.status = SampleStatus.ABORTED if reason == "abort" else SampleStatus.COMPLETED
        sample.response = self.tokenizer.decode(sample.response_ids, skip_special_tokens=True)
        return sample

    def start(self, sample: Sample, version: int) -> None:
        if not sample.response_ids:
            # Staleness counts from the version that produced the first token.
            sample.policy_version = version
        sample.status = SampleStatus.INIT
        sample.finish_reason = None

    def is_final(self, request: GenerationRequest, output: GenerationOutput) -> bool:
        """Does this finished row end its trajectory? (Used to count completed groups mid-batch.)"""
        return True

    # --- the loop -----------------------------------------------------------------------------

    async def run(self, sample: Sample, version: int) -> Sample:
        self.start(sample, version)
        if len(sample.response_ids) >= self.params.max_new_tokens:
            return self._finish(sample, "length")
        output = await self.controller.generate(self._request(sample), self.params)
        self._append(sample, output)
        return self._finish(sample, output.finish_reason)


# --- calculator tool ---------------------------------------------------------------------------

CALL_OPEN, CALL_CLOSE = "<calc>", "</calc>"
RESULT_OPEN, RESULT_CLOSE = "<result>", "</result>"

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class CalculatorError(ValueError):
    pass


def calculate(expression: str) -> str:
    """Evaluate plain arithmetic (numbers, + - * / // % **, parentheses) without executing code."""
    if len(expression) > 200:
        raise CalculatorError("expression too long")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError("not an arithmetic expression") from None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
                raise CalculatorError("power too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        raise CalculatorError("only numbers and + - * / // % ** are allowed")

    try:
        value = ev(tree)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalculatorError("result is not finite")
        if value.is_integer():
            return str(int(value))
        return f"{value:.6g}"
    return str(value)


class CalculatorAgent(SingleTurnAgent):
    name = "calculator"

    def __init__(self, controller: RolloutController, tokenizer, params: SamplingParams, max_turns: int):
        super().__init__(controller, tokenizer, params)
        self.max_turns = max_turns

    def is_final(self, request: GenerationRequest, output: GenerationOutput) -> bool:
        sample: Sample = request.tag
        called_tool = output.finish_reason == "stop" and output.stop == CALL_CLOSE
        return not called_tool or int(sample.metadata.get("turns", 0)) + 1 >= self.max_turns

    def _tool_tokens(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    async def run(self, sample: Sample, version: int) -> Sample:
        self.start(sample, version)
        while True:
            if len(sample.response_ids) >= self.params.max_new_tokens:
                return self._finish(sample, "length")
            turn_start = len(sample.response_ids)
            output = await self.controller.generate(self._request(sample, (CALL_CLOSE,)), self.params)
            self._append(sample, output)
            if not (output.finish_reason == "stop" and output.stop == CALL_CLOSE):
                return self._finish(sample, output.finish_reason)
            turns = int(sample.metadata.get("turns", 0)) + 1
            sample.metadata["turns"] = turns
            if turns >= self.max_turns:
                return self._finish(sample, "length")  # out of turns: the trajectory is cut here
            turn_text = self.tokenizer.decode(sample.response_ids[turn_start:], skip_special_tokens=True)
            expression = turn_text.rsplit(CALL_OPEN, 1)[-1].removesuffix(CALL_CLOSE) if CALL_OPEN in turn_text else ""
            try:
                result = calculate(expression)
            except CalculatorError as exc:
                result = f"error: {exc}"
            tool = self._tool_tokens(f"{RESULT_OPEN}{result}{RESULT_CLOSE}")
            room = self.params.max_new_tokens - len(sample.response_ids)
            sample.response_ids.extend(tool[:room])
            sample.logprobs.extend([0.0] * len(tool[:room]))
            sample.response_mask.extend([0] * len(tool[:room]))
            if len(tool) > room:
                return self._finish(sample, "length")


def build_agent(kind: str, controller: RolloutController, tokenizer, params: SamplingParams, max_turns: int):
    if kind == "single_turn":
        return SingleTurnAgent(controller, tokenizer, params)
    if kind == "calculator":
        return CalculatorAgent(controller, tokenizer, params, max_turns)
    raise ValueError(f"unknown agent loop {kind!r}")
