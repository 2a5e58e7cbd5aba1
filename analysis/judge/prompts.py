"""The LLM judge's prompts, as the paper "On Calibration of LLMs: From Response To Capability" uses them.

The judge sees the question, the gold answer and the **extracted** answer of one response (never the whole
response), as one user message:

- TriviaQA and SimpleQA: the SimpleQA grader prompt (``GRADER_TEMPLATE`` of ``simpleqa_eval.py``); the judge
  grades A (CORRECT), B (INCORRECT) or C (NOT_ATTEMPTED), and only A counts as correct;
- MATH: the equivalence prompt (``EQUALITY_TEMPLATE`` of ``common.py``) on the gold answer (expression 1) and
  the extracted answer (expression 2); "Yes" counts as correct.

Source of both prompt texts: OpenAI simple-evals, https://github.com/openai/simple-evals, ``simpleqa_eval.py``
and ``common.py`` at commit ee3b0318d8d1d9d72755a4120879be65f7c07e9e (2025-07-09); MIT License, Copyright (c)
2024 OpenAI. The texts below are those templates verbatim (their typos and trailing spaces included); only
the placeholders are filled in, in one pass (a ``{`` or ``%`` in a question or answer is never read as a
placeholder).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EQUALITY_TEMPLATE",
    "GRADER_TEMPLATE",
    "JUDGE_PROMPTS",
    "MATH_EQUIVALENCE",
    "SIMPLEQA_GRADER",
    "JudgePrompt",
    "judge_messages",
    "prompt_for_dataset",
]

SIMPLEQA_GRADER, MATH_EQUIVALENCE = "simpleqa-grader", "math-equivalence"

GRADER_TEMPLATE = """
Your job is to look at a question, a gold target, and a predicted answer, and then assign a grade of either ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"].
First, I will give examples of each grade, and then you will grade a new example.


The following are examples of CORRECT predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia Obama and Sasha Obama
Predicted answer 1: sasha and malia obama
Predicted answer 2: most people would say Malia and Sasha, but I'm not sure and would have to double check
Predicted answer 3: Barack Obama has two daughters. Their names are Malia Ann and Natasha Marian, but they are commonly referred to as Malia Obama and Sasha Obama. Malia was born on July 4, 1998, and Sasha was born on June 10, 2001.
```
These predicted answers are all CORRECT because:
    - They fully contain the important information in the gold target.
    - They do not contain any information that contradicts the gold target.
    - Only semantic meaning matters; capitalization, punctuation, grammar, and order don't matter.
    - Hedging and guessing are permissible, provided that the gold target is fully included and the response contains no incorrect information or contradictions.


The following are examples of INCORRECT predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia and Sasha
Predicted answer 1: Malia.
Predicted answer 2: Malia, Sasha, and Susan.
Predicted answer 3: Barack Obama does not have any children.
Predicted answer 4: I think it's either Malia and Sasha. Or it could be Malia and Jackie. Or it could be Joey and Malia.
Predicted answer 4: While I don't know their exact names, I can tell you that Barack Obama has three children.
Predicted answer 5: It's possible you may mean Betsy and Olivia. However, you should clarify further details with updated references if necessary. Is that the correct answer?
Predicted answer 6: It may be the case that Obama's child is named James. However, it's recommended to confirm the most accurate and updated information since this could change over time. This model may not always reflect the most current information.
```
These predicted answers are all INCORRECT because:
    - A factual statement in the answer contradicts the gold target. Incorrect statements that have some hedging (e.g., "it is possible that", "although i'm not sure, i think") are also considered incorrect.


The following are examples of NOT_ATTEMPTED predicted answers.
```
Question: What are the names of Barack Obama's children?
Gold target: Malia and Sasha
Predicted answer 1: I don't know.
Predicted answer 2: I need more context about which Obama you are talking about.
Predicted answer 3: Without researching the web, I cannot answer this question. However, I can tell you that Barack Obama has two children.
Predicted answer 4: Barack Obama has two children. I know that one of them is Malia, but I'm not sure about the other one.
```
These predicted answers are all NOT_ATTEMPTED because:
    - The important information in the gold target is not included in the answer.
    - No statements in the answer contradict the gold target.


Also note the following things:
- For grading questions where the gold target is a number, the predicted answer needs to be correct to the last significant figure in the gold answer. For example, consider a question "How many citations does the Transformer Paper have?" with gold target "120k". 
    - Predicted answers "120k", "124k", and 115k" are all CORRECT. 
    - Predicted answers "100k" and "113k" are INCORRECT. 
    - Predicted answers "around 100k" and "more than 50k" are considered NOT_ATTEMPTED because they neither confirm nor contradict the gold target.
- The gold target may contain more information than the question. In such cases, the predicted answer only needs to contain the information that is in the question.
    - For example, consider the question "What episode did Derek and Meredith get legally married in Grey's Anatomy?" with gold target "Season 7, Episode 20: White Wedding". Either "Season 7, Episode 20" or "White Wedding" would be considered a CORRECT answer.
- Do not punish predicted answers if they omit information that would be clearly inferred from the question.
    - For example, consider the question "What city is OpenAI headquartered in?" and the gold target "San Francisco, California". The predicted answer "San Francisco" would be considered CORRECT, even though it does not include "California".
    - Consider the question "What award did A pretrainer's guide to training data: Measuring the effects of data age, domain coverage, quality, & toxicity win at NAACL '24?", the gold target is "Outstanding Paper Award". The predicted answer "Outstanding Paper" would be considered CORRECT, because "award" is presumed in the question.
    - For the question "What is the height of Jason Wei in meters?", the gold target is "1.73 m". The predicted answer "1.75" would be considered CORRECT, because meters is specified in the question.
    - For the question "What is the name of Barack Obama's wife?", the gold target is "Michelle Obama". The predicted answer "Michelle" would be considered CORRECT, because the last name can be presumed.
- Do not punish for typos in people's name if it's clearly the same name. 
    - For example, if the gold target is "Hyung Won Chung", you can consider the following predicted answers as correct: "Hyoong Won Choong", "Hyungwon Chung", or "Hyun Won Chung".


Here is a new example. Simply reply with either CORRECT, INCORRECT, NOT ATTEMPTED. Don't apologize or correct yourself if there was a mistake; we are just trying to grade the answer.
```
Question: {question}
Gold target: {target}
Predicted answer: {predicted_answer}
```

Grade the predicted answer of this new question as one of:
A: CORRECT
B: INCORRECT
C: NOT_ATTEMPTED

Just return the letters "A", "B", or "C", with no text around it.
""".strip()  # noqa: E501, W291 (verbatim, trailing spaces included)

EQUALITY_TEMPLATE = r"""
Look at the following two expressions (answers to a math problem) and judge whether they are equivalent. Only perform trivial simplifications

Examples:

    Expression 1: $2x+3$
    Expression 2: $3+2x$

Yes

    Expression 1: 3/2
    Expression 2: 1.5

Yes

    Expression 1: $x^2+2x+1$
    Expression 2: $y^2+2y+1$

No

    Expression 1: $x^2+2x+1$
    Expression 2: $(x+1)^2$

Yes

    Expression 1: 3245/5
    Expression 2: 649

No
(these are actually equal, don't mark them equivalent if you need to do nontrivial simplifications)

    Expression 1: 2/(-3)
    Expression 2: -2/3

Yes
(trivial simplifications are allowed)

    Expression 1: 72 degrees
    Expression 2: 72

Yes
(give benefit of the doubt to units)

    Expression 1: 64
    Expression 2: 64 square feet

Yes
(give benefit of the doubt to units)

---

YOUR TASK


Respond with only "Yes" or "No" (without quotes). Do not include a rationale.

    Expression 1: %(expression1)s
    Expression 2: %(expression2)s
""".strip()  # noqa: E501


@dataclass(frozen=True)
class JudgePrompt:
    """One of the judge's prompts: its name, template, the placeholders (in the template's own syntax) that
    the question, the gold answer and the extracted answer fill, and the verdicts it asks for."""

    name: str
    template: str
    placeholders: tuple[tuple[str, str], ...]  # (placeholder, field: question | gold | answer)
    verdicts: tuple[str, ...]

    def render(self, question: str, gold: str, answer: str) -> str:
        """The template with its placeholders filled in one pass (a filled-in value is never re-read)."""
        values = {"question": question, "gold": gold, "answer": answer}
        text, parts = self.template, []
        while True:
            found = [(text.find(p), p, field) for p, field in self.placeholders if p in text]
            if not found:
                parts.append(text)
                break
            index, placeholder, field = min(found)
            parts += [text[:index], values[field]]
            text = text[index + len(placeholder) :]
        return "".join(parts)


JUDGE_PROMPTS: dict[str, JudgePrompt] = {
    SIMPLEQA_GRADER: JudgePrompt(
        SIMPLEQA_GRADER,
        GRADER_TEMPLATE,
        (("{question}", "question"), ("{target}", "gold"), ("{predicted_answer}", "answer")),
        ("A", "B", "C"),
    ),
    MATH_EQUIVALENCE: JudgePrompt(
        MATH_EQUIVALENCE,
        EQUALITY_TEMPLATE,
        (("%(expression1)s", "gold"), ("%(expression2)s", "answer")),
        ("Yes", "No"),
    ),
}

# capcal_dataset (a task's declared dataset) -> the judge prompt of the paper; the other datasets (GSM8K,
# AIME, MMLU, GPQA) keep their rule-based labels in the paper
DATASET_PROMPTS = {"triviaqa": SIMPLEQA_GRADER, "simpleqa": SIMPLEQA_GRADER, "math": MATH_EQUIVALENCE}


def prompt_for_dataset(dataset: str | None, task: str) -> JudgePrompt:
    """The judge prompt of a task's dataset; ``ValueError`` naming the task for a dataset the paper does not
    judge."""
    name = DATASET_PROMPTS.get(dataset or "")
    if name is None:
        raise ValueError(
            f"the LLM judge has no prompt for task {task!r} (dataset {dataset!r}): as in the paper it judges "
            f"{', '.join(sorted(DATASET_PROMPTS))} only; the other tasks keep their rule-based labels"
        )
    return JUDGE_PROMPTS[name]


def judge_messages(prompt: JudgePrompt, question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The chat messages of one judge request: the filled-in prompt as the one user message."""
    return [{"role": "user", "content": prompt.render(question, gold, answer)}]
