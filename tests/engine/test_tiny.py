"""builtin:tiny-arith: tokenizer, architecture, warm-up band, caching and local-only loading."""

import json
import threading
import time

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from workers.rl import arith, tiny
from workers.rl.modeling import ModelPathError, resolve_model_path

torch.set_num_threads(1)


def test_the_tokenizer_is_character_level_with_bos_eos_and_left_padding():
    tokenizer = tiny.build_tokenizer()
    ids = tokenizer("37+45=").input_ids
    assert ids[0] == tokenizer.bos_token_id and len(ids) == 7
    assert tokenizer.convert_ids_to_tokens(ids[1:]) == list("37+45=")
    answer = tokenizer("82", add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    assert tokenizer.decode(answer, skip_special_tokens=True) == "82"
    assert tokenizer.decode(tokenizer("a b\n{c}").input_ids, skip_special_tokens=True) == "a b\n{c}"
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None


def test_the_model_is_a_two_layer_llama_of_about_half_a_million_parameters():
    model = tiny.build_model(tiny.build_tokenizer(), seed=0)
    cfg = model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("llama", 2, 128)
    assert 400_000 <= sum(p.numel() for p in model.parameters()) <= 600_000


def test_the_built_model_loads_like_any_checkpoint_and_leaves_rl_room():
    path = resolve_model_path("builtin:tiny-arith")
    assert path == tiny.tiny_model_dir(0) and tiny.is_built(path)
    info = json.loads((path / "tiny_arith.json").read_text())
    assert 0.10 <= info["accuracy"] <= 0.50
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # The stored accuracy is what the loaded model measures: the same weights, the same eval.
    check = arith.pool("eval")[-tiny.WARMUP["check_problems"]:]
    assert tiny.greedy_accuracy(model, tokenizer, check) == info["accuracy"]


def test_warm_up_is_deterministic_for_a_seed():
    def short_warmup():
        tokenizer = tiny.build_tokenizer()
        model = tiny.build_model(tokenizer, seed=3)
        report = tiny.warm_up(model, tokenizer, seed=3, target_accuracy=0.01, check_every=5, check_problems=64)
        return model, report

    (a, report_a), (b, report_b) = short_warmup(), short_warmup()
    assert report_a["steps"] == report_b["steps"] > 0
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name


def test_concurrent_builds_build_once(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    calls = []

    def slow_build(out_dir, seed=0, **_):
        calls.append(seed)
        time.sleep(0.5)  # long enough for the other thread to arrive while this one holds the lock
        out_dir.mkdir(parents=True)
        (out_dir / "tiny_arith.json").write_text(json.dumps({"recipe": tiny.recipe()}))
        return {"parameters": 0, "accuracy": 0.0, "steps": 0, "build_seconds": 0.0}

    monkeypatch.setattr(tiny, "build_tiny_model", slow_build)
    results = []
    threads = [threading.Thread(target=lambda: results.append(tiny.ensure_tiny_model(seed=5))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [5]
    assert results == [tmp_path / "models" / "tiny-arith-seed5"] * 2
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")], "no temporary directory left"


def test_a_build_from_another_recipe_is_not_reused(tmp_path):
    (tmp_path / "tiny_arith.json").write_text(json.dumps({"recipe": {"version": -1}}))
    assert not tiny.is_built(tmp_path)


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.2-1B"])
def test_hub_names_are_refused_with_a_clear_error(name):
    with pytest.raises(ModelPathError, match="local directories"):
        resolve_model_path(name)


def test_missing_or_non_model_directories_are_refused(tmp_path):
    with pytest.raises(ModelPathError, match="does not exist"):
        resolve_model_path(str(tmp_path / "nope"))
    with pytest.raises(ModelPathError, match="no config.json"):
        resolve_model_path(str(tmp_path))
    with pytest.raises(ModelPathError, match="unknown builtin"):
        resolve_model_path("builtin:gpt-5")
