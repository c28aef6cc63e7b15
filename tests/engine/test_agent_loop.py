"""Agent loops over a scripted engine: what the model "says" is fixed, so the test pins down
exactly what the loop adds (tool results), masks, and how it continues a partial response."""

import asyncio

import pytest

from workers.rl import tiny
from workers.rl.agent_loop import CalculatorAgent, CalculatorError, SingleTurnAgent, calculate
from workers.rl.rollout.base import GenerationOutput, SamplingParams
from workers.rl.rollout.controller import RolloutController
from workers.rl.sample import Sample, SampleStatus


class ScriptedEngine:
    """Answers the k-th call of each row with the k-th scripted text (a stand-in for a model)."""

    def __init__(self, tokenizer, script: list[str]):
        self.tokenizer, self.script, self.requests = tokenizer, script, []

    def generate(self, requests, params, should_abort=None, on_finish=None):
        outs = []
        for req in requests:
            self.requests.append(req)
            text = self.script.pop(0)
            ids = self.tokenizer(text.replace("<eos>", ""), add_special_tokens=False).input_ids
            if text.endswith("<eos>"):
                ids.append(self.tokenizer.eos_token_id)
            ids = ids[: req.max_new_tokens]
            stop = next((s for s in req.stop_strings if text.endswith(s)), None)
            reason = "stop" if text.endswith("<eos>") or stop else "length"
            outs.append(GenerationOutput(ids, [-0.5] * len(ids), reason, stop or (ids[-1] if reason == "stop" else None)))
        return outs

    def sleep(self): ...
    def wake_up(self): ...
    def sync_weights(self): ...


@pytest.fixture
def tokenizer():
    return tiny.build_tokenizer()


def new_sample(tokenizer, prompt="What is 6*7?"):
    return Sample(uid="u", group_id="g", prompt=prompt, prompt_ids=tokenizer(prompt).input_ids, metadata={"seed": 1})


@pytest.mark.parametrize("expression, value", [("2+3*4", "14"), ("7/2", "3.5"), ("(1+2)**3", "27"), ("-4 // 3", "-2"), ("6/3", "2")])
def test_the_calculator_evaluates_plain_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os').system('id')", "x+1", "2**999", "1/0", "[1,2]", "(lambda: 1)()"])
def test_the_calculator_refuses_everything_else(expression):
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_calculator_tool_tokens_are_in_the_response_with_mask_0(tokenizer):
    engine = ScriptedEngine(tokenizer, ["<calc>6*7</calc>", "42<eos>"])
    agent = CalculatorAgent(RolloutController(engine), tokenizer, SamplingParams(1.0, 1.0, 64), max_turns=4)
    sample = asyncio.run(agent.run(new_sample(tokenizer), version=2))
    assert sample.response == "<calc>6*7</calc><result>42</result>42"
    assert sample.status == SampleStatus.COMPLETED and sample.finish_reason == "stop"
    tool = tokenizer("<result>42</result>", add_special_tokens=False).input_ids
    model_1 = len(tokenizer("<calc>6*7</calc>", add_special_tokens=False).input_ids)
    assert sample.response_mask == [1] * model_1 + [0] * len(tool) + [1] * 3
    assert sample.logprobs == [-0.5] * model_1 + [0.0] * len(tool) + [-0.5] * 3
    # The second turn saw the prompt, the first turn and the tool result, and had less room.
    second = engine.requests[1]
    assert second.input_ids == sample.prompt_ids + sample.response_ids[: model_1 + len(tool)]
    assert second.max_new_tokens == 64 - model_1 - len(tool)
    assert engine.requests[0].seed != second.seed


def test_a_calculator_error_is_told_to_the_model(tokenizer):
    engine = ScriptedEngine(tokenizer, ["<calc>2**999</calc>", "no<eos>"])
    agent = CalculatorAgent(RolloutController(engine), tokenizer, SamplingParams(1.0, 1.0, 64), max_turns=4)
    sample = asyncio.run(agent.run(new_sample(tokenizer), version=0))
    assert "<result>error: power too large</result>" in sample.response


def test_the_calculator_loop_stops_after_max_turns(tokenizer):
    engine = ScriptedEngine(tokenizer, ["<calc>1+1</calc>", "<calc>2+2</calc>"])
    agent = CalculatorAgent(RolloutController(engine), tokenizer, SamplingParams(1.0, 1.0, 64), max_turns=2)
    sample = asyncio.run(agent.run(new_sample(tokenizer), version=0))
    assert sample.finish_reason == "length" and sample.response.endswith("<calc>2+2</calc>")


def test_single_turn_continues_a_partial_response_and_keeps_its_version(tokenizer):
    engine = ScriptedEngine(tokenizer, ["2<eos>"])
    agent = SingleTurnAgent(RolloutController(engine), tokenizer, SamplingParams(1.0, 1.0, 4))
    sample = new_sample(tokenizer, "37+45=")
    sample.response_ids = tokenizer("8", add_special_tokens=False).input_ids
    sample.logprobs, sample.response_mask = [-0.25], [1]
    sample.status, sample.finish_reason, sample.policy_version = SampleStatus.ABORTED, "abort", 3
    asyncio.run(agent.run(sample, version=4))
    assert engine.requests[0].input_ids == sample.prompt_ids + sample.response_ids[:1]
    assert engine.requests[0].max_new_tokens == 3
    assert sample.response == "82" and sample.logprobs == [-0.25, -0.5, -0.5]
    assert sample.policy_version == 3 and sample.status == SampleStatus.COMPLETED


def test_the_controller_batches_concurrent_agent_loops_into_one_engine_call(tokenizer):
    calls = []

    class CountingEngine(ScriptedEngine):
        def generate(self, requests, params, should_abort=None, on_finish=None):
            calls.append(len(requests))
            return super().generate(requests, params, should_abort, on_finish)

    engine = CountingEngine(tokenizer, ["1<eos>"] * 5)
    agent = SingleTurnAgent(RolloutController(engine), tokenizer, SamplingParams(1.0, 1.0, 4))

    async def run_all():
        return await asyncio.gather(*(agent.run(new_sample(tokenizer), version=0) for _ in range(5)))

    asyncio.run(run_all())
    assert calls == [5]
