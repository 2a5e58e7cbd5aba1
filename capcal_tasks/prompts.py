r"""The paper's prompts, quoted exactly ("On Calibration of LLMs: From Response To
Capability" and "Efficient Test-Time Scaling via Self-Calibration", Huang et al. 2025).

Sampling: zero-shot, no system prompt; the user message is the question, a blank line, and the instruction for
the dataset's kind of answer. Confidence elicitation: verbalized confidence and P(True), each in a capability
form (the question only) and a response form (the question and one of the model's own responses), and
Self-Calibration's per-response check question (Huang et al. 2025).
"""

from __future__ import annotations

__all__ = [
    "CHOICE_INSTRUCTION",
    "MATH_INSTRUCTION",
    "NUMBER_INSTRUCTION",
    "SELF_CHECK_QUESTION",
    "SHORT_ANSWER_INSTRUCTION",
    "logged_sampling_prompt",
    "ptrue_capability_prompt",
    "ptrue_response_prompt",
    "sampling_prompt",
    "verbalized_capability_prompt",
    "verbalized_response_prompt",
]

SHORT_ANSWER_INSTRUCTION = (
    "After your reasoning, provide your final answer in the format of \\boxed{X}. For example, for the "
    "question 'Which American-born Sinclair won the Nobel Prize for Literature in 1930?', the answer is "
    "\\boxed{Sinclair Lewis}."
)
NUMBER_INSTRUCTION = "After your reasoning, provide your final answer number X in the format of \\boxed{X}."
MATH_INSTRUCTION = (
    "After your reasoning, provide your final mathematical answer string X in the format of \\boxed{X}."
)
CHOICE_INSTRUCTION = (
    "After your reasoning, provide your final answer choice X (A, B, C, or D) in the format of \\boxed{X}."
)

_PROBABILITY_SCALE = """You may refer to the following probabilities P:
- 0.0-0.1: "Almost no chance"
- 0.1-0.2: "Highly unlikely"
- 0.2-0.3: "Chances are slight"
- 0.3-0.4: "Unlikely"
- 0.4-0.5: "Less than even"
- 0.5-0.6: "Better than even"
- 0.6-0.7: "Likely"
- 0.7-0.8: "Very good chance"
- 0.8-0.9: "Highly likely"
- 0.9-1.0: "Almost certain"
Reason about your uncertainty and confidence, and then provide a probability P between 0.0 and 1.0 in the \
format of \\boxed{P}."""

_YES_OR_NO = "Answer with only a single word: Yes or No."

SELF_CHECK_QUESTION = "Is the answer correct? (Yes/No)"


def sampling_prompt(question: str, instruction: str) -> str:
    """The sampling task's user message: ``{question}\\n\\n{instruction}``."""
    return f"{question.strip()}\n\n{instruction}"


def logged_sampling_prompt(doc: dict, instruction: str) -> str:
    """The sampling prompt a logged doc was asked with: ``sampling_prompt`` of its ``question_text`` and the
    task's instruction (the instruction alone for a doc without question text). The checkers remove what a
    response repeats of it."""
    return sampling_prompt(str(doc.get("question_text") or ""), instruction)


def verbalized_capability_prompt(question: str) -> str:
    """Verbalized confidence, capability form: how likely the model is to answer the question correctly."""
    return (
        f"Question: {question.strip()}\n\n"
        f"How likely are you to answer the question correctly? {_PROBABILITY_SCALE}"
    )


def verbalized_response_prompt(question: str, response: str) -> str:
    """Verbalized confidence, response form: how likely the model's own response is to be correct."""
    return (
        f"Question: {question.strip()}\nYour response: {response.strip()}\n\n"
        f"How likely is your response to be correct? {_PROBABILITY_SCALE}"
    )


def ptrue_capability_prompt(question: str) -> str:
    """P(True), capability form; the confidence is the probability of the answer "Yes"."""
    return f"Question: {question.strip()}\n\nAre you able to answer the question correctly?\n{_YES_OR_NO}"


def ptrue_response_prompt(question: str, response: str) -> str:
    """P(True), response form; the confidence is the probability of the answer "Yes"."""
    return (
        f"Question: {question.strip()}\nYour response: {response.strip()}\n\n"
        f"Is your response correct?\n{_YES_OR_NO}"
    )
