"""The preview renders prompts exactly as the engine does, without transformers in the web process."""

import json

import pytest

from rlweb.datasets.rendering import RenderError, load_chat_template, render_prompt

CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}{% set messages = messages[1:] %}"
    "{% else %}{% set system = 'You are helpful.' %}{% endif %}"
    "{{ bos_token }}<|system|>\n{{ system }}\n"
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] | trim }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
ROWS = [
    {"prompt": "What is 2+2?", "messages": None},
    {"prompt": "", "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Capital of France? "}]},
    {"prompt": "", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]},
]


@pytest.fixture
def model_dir(tmp_path, settings):
    """A real tokenizer saved with a chat template, under MODEL_ROOTS."""
    from workers.rl.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    path = tmp_path / "models" / "chat-tiny"
    tokenizer.save_pretrained(path)
    settings.MODEL_ROOTS = [tmp_path / "models"]
    return path


@pytest.mark.parametrize("template", ["{prompt}", "Question: {prompt}\nAnswer step by step."])
def test_rendering_matches_the_engines_prompt_renderer_with_a_chat_template(model_dir, template):
    from transformers import AutoTokenizer

    from workers.rl.config import DataConfig
    from workers.rl.data import PromptRenderer

    engine = PromptRenderer(AutoTokenizer.from_pretrained(model_dir), DataConfig(prompt_template=template))
    chat = load_chat_template(str(model_dir))
    assert chat is not None
    for row in ROWS:
        assert render_prompt(row["prompt"], row["messages"], template, chat) == engine.text(row), row


def test_without_a_chat_template_rendering_matches_the_engine_too(model_dir):
    from transformers import AutoTokenizer

    from workers.rl.config import DataConfig
    from workers.rl.data import PromptRenderer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = DataConfig(prompt_template="Q: {prompt}", use_chat_template=False)
    engine = PromptRenderer(tokenizer, config)
    for row in ROWS:
        assert render_prompt(row["prompt"], row["messages"], "Q: {prompt}", None) == engine.text(row)


def test_the_builtin_model_has_no_chat_template_and_paths_outside_model_roots_are_refused(tmp_path, settings):
    settings.MODEL_ROOTS = [tmp_path]
    assert load_chat_template("builtin:tiny-arith") is None
    assert render_prompt("37+45=", None, "{prompt}", None) == "37+45="
    with pytest.raises(RenderError, match="not under a model directory"):
        load_chat_template("/etc")


def test_a_template_cannot_reach_python_internals(tmp_path, settings):
    settings.MODEL_ROOTS = [tmp_path]
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages.__class__.__mro__ }}"}))
    chat = load_chat_template(str(tmp_path / "evil"))
    with pytest.raises(RenderError):
        chat.render([{"role": "user", "content": "x"}])
