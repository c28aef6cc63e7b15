"""Arithmetic rows, dataset loading, prompt rendering and the resumable prompt sampler."""

import json

import pytest

from workers.rl import arith, tiny
from workers.rl.config import DataConfig
from workers.rl.data import DataError, PromptRenderer, PromptSampler, load_rows


def test_arith_eval_and_train_pools_are_disjoint_and_cover_every_problem():
    train, evaluation = set(arith.pool("train")), set(arith.pool("eval"))
    assert not train & evaluation
    assert len(train | evaluation) == 90 * 90


def test_arith_rows_are_seeded_and_correct():
    rows = arith.make_rows("train", 50, seed=1)
    assert rows == arith.make_rows("train", 50, seed=1) != arith.make_rows("train", 50, seed=2)
    for row in rows:
        a, b = row["prompt"].rstrip("=").split("+")
        assert row["answer"] == str(int(a) + int(b)) and row["data_source"] == "arith"
    assert len({r["prompt"] for r in rows}) == 50, "no repeats while the pool lasts"


def test_builtin_eval_rows_do_not_depend_on_the_run_seed():
    cfg = DataConfig(builtin_eval_size=20)
    assert load_rows("builtin:arith", cfg, "eval", seed=1) == load_rows("builtin:arith", cfg, "eval", seed=2)


def test_jsonl_rows_accept_prompt_or_messages_and_answer_or_label(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(
        json.dumps({"prompt": "2+2=", "answer": 4, "data_source": "math"}) + "\n\n"
        + json.dumps({"messages": [{"role": "user", "content": "hi"}], "label": "x"}) + "\n"
    )
    rows = load_rows(str(path), DataConfig(), "train", seed=0)
    assert rows[0] == {"prompt": "2+2=", "messages": None, "label": "4", "data_source": "math", "index": 0}
    assert rows[1]["messages"][0]["content"] == "hi" and rows[1]["label"] == "x" and rows[1]["index"] == 1


def test_bad_jsonl_rows_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n{"answer": 3}\n')
    with pytest.raises(DataError, match="bad.jsonl:2"):
        load_rows(str(path), DataConfig(), "train", seed=0)
    with pytest.raises(DataError, match="does not exist"):
        load_rows(str(tmp_path / "missing.jsonl"), DataConfig(), "train", seed=0)
    with pytest.raises(DataError, match="web worker"):
        load_rows("dataset:3", DataConfig(), "train", seed=0)


def test_the_prompt_template_is_a_plain_replacement_never_format():
    tokenizer = tiny.build_tokenizer()
    cfg = DataConfig(prompt_template="Q: {prompt} {x} {{y}} {0}", use_chat_template=True)
    text, ids = PromptRenderer(tokenizer, cfg).render({"prompt": "1+1=", "messages": None})
    assert text == "Q: 1+1= {x} {{y}} {0}"
    assert ids[0] == tokenizer.bos_token_id, "no chat template: the tokenizer's own bos is added"


def test_a_chat_template_renders_the_prompt_as_a_user_turn():
    tokenizer = tiny.build_tokenizer()
    tokenizer.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    renderer = PromptRenderer(tokenizer, DataConfig(prompt_template="Solve {prompt}"))
    text, ids = renderer.render({"prompt": "1+1=", "messages": None})
    assert text == "<user>Solve 1+1=\n<assistant>"
    assert ids[0] != tokenizer.bos_token_id, "the template decides the special tokens"
    text, _ = renderer.render({"prompt": None, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2="}]})
    assert text == "<system>be brief\n<user>Solve 2+2=\n<assistant>"
    plain = PromptRenderer(tokenizer, DataConfig(use_chat_template=False))
    assert plain.render({"prompt": "1+1=", "messages": None})[0] == "1+1="


def test_long_prompts_keep_their_end():
    tokenizer = tiny.build_tokenizer()
    _, ids = PromptRenderer(tokenizer, DataConfig(max_prompt_len=4, use_chat_template=False)).render({"prompt": "123456789=", "messages": None})
    assert tokenizer.decode(ids) == "789="


def test_the_sampler_covers_each_epoch_and_resumes_mid_epoch():
    sampler = PromptSampler(10, seed=3)
    first_epoch = sampler.next_indices(10)
    assert sorted(first_epoch) == list(range(10)) and first_epoch != list(range(10))
    sampler.next_indices(4)
    state = sampler.state_dict()
    expected = sampler.next_indices(13)
    resumed = PromptSampler(10, seed=3)
    resumed.load_state_dict(state)
    assert resumed.next_indices(13) == expected
    with pytest.raises(DataError, match="changed"):
        PromptSampler(11, seed=3).load_state_dict(state)
    assert PromptSampler(5, seed=3, shuffle=False).next_indices(7) == [0, 1, 2, 3, 4, 0, 1]
