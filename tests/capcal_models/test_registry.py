from capcal_models.registry import register_models


def test_register_models_keeps_lm_evals_builtin_models():
    names = register_models()
    for builtin in ("hf", "vllm", "local-completions", "local-chat-completions"):
        assert builtin in names
