"""The tokenised examples of Self-Calibration training (``analysis.self_calibration.encoding``), on SmolLM2's
real tokenizer (no model is loaded)."""

from __future__ import annotations

import pytest

from analysis.self_calibration.data import SelfCalibrationDataError
from analysis.self_calibration.encoding import encode_tuples, padding_id


@pytest.fixture(scope="module")
def tokenizer(smollm2_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smollm2_path))


def test_the_causal_lm_example_labels_exactly_the_responses_tokens_and_the_end_token(tokenizer):
    """The response begins after a newline (its own token), so its labelled tokens decode to the response's
    text and the end-of-sequence token, and the unlabelled ones to the context before it; the confidence
    example is the whole context, unlabelled, with the one token of the continuation scored."""
    prompt = "Question: what is 2 + 2?\nAnswer:\n"
    response = "The answer is 4."
    context = prompt + response + "\nIs the answer correct? Answer Yes or No."
    start, end = len(prompt), len(prompt) + len(response)
    item = {"context": context, "yes_text": " Yes", "response_start": start, "response_end": end}
    with_lm, without_lm = encode_tuples(
        [{**item, "lm_loss": True, "ssc": 0.75}, {**item, "lm_loss": False, "ssc": 0.25}], tokenizer, 512
    )
    context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
    (yes_id,) = tokenizer("Yes", add_special_tokens=False)["input_ids"]
    for example, ssc in ((with_lm, 0.75), (without_lm, 0.25)):
        assert example["input_ids"] == context_ids
        assert example["labels"] == [-100] * len(context_ids)
        assert (example["yes_id"], example["target"]) == (yes_id, ssc)
    assert without_lm["lm"] is None
    lm = with_lm["lm"]
    assert tokenizer.decode(lm["input_ids"]) == context[:end] + tokenizer.eos_token
    labelled = [k for k, label in enumerate(lm["labels"]) if label != -100]
    assert labelled == list(range(labelled[0], len(lm["input_ids"])))  # one run, to the end
    assert [lm["labels"][k] for k in labelled] == [lm["input_ids"][k] for k in labelled]
    assert tokenizer.decode([lm["input_ids"][k] for k in labelled]) == response + tokenizer.eos_token
    assert tokenizer.decode(lm["input_ids"][: labelled[0]]) == prompt
    with pytest.raises(
        SelfCalibrationDataError, match=r"^tuple 1 \(question q1\): \d+ tokens, more than max_length 5$"
    ):
        encode_tuples([{**item, "lm_loss": False, "ssc": 0.5, "question_id": "q1"}], tokenizer, 5)


def test_padding_is_the_pad_token_else_the_end_token_and_neither_is_refused() -> None:
    from types import SimpleNamespace

    assert padding_id(SimpleNamespace(pad_token_id=3, eos_token_id=7)) == 3
    assert padding_id(SimpleNamespace(pad_token_id=0, eos_token_id=7)) == 0  # 0 is an id, not "none"
    assert padding_id(SimpleNamespace(pad_token_id=None, eos_token_id=7)) == 7
    with pytest.raises(SelfCalibrationDataError, match="^the tokenizer has neither a padding nor an end"):
        padding_id(SimpleNamespace(pad_token_id=None, eos_token_id=None))
