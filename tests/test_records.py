"""Record types keep their value or identity semantics (issue 49, point 2: every record type).

A frozen dataclass is a value: it is compared and hashed by its fields, and assigning to a field raises, so a
record handed to two report sections, cached by an ``lru_cache`` or used as a dict key cannot change under
one of them. A dataclass declared ``eq=False`` is working state compared by identity: the decode loop finds
its rows and batches with ``is``/``in``/``list.remove`` (a field-wise ``==`` would compare tensors), and
the HTTP transport keys its jobs by object. Dropping ``frozen=True`` or ``eq=False`` changes neither a
result nor a message that the module's own tests read, so the contract is written out here, type by type:
the expected flags are this file's lists, not read back from the code, and every dataclass of the four
packages must be in one of them (a new one is classified when it is written).
"""

# The mutation driver (tests/mutation_operators.py) selects a test file by its imports or by these lines:
# exercises: analysis.applications.budget, analysis.applications.self_calibration_strategies
# exercises: analysis.cli.command, analysis.demo, analysis.estimators.consistency, analysis.estimators.probes
# exercises: analysis.estimators.recalibration, analysis.evaluation.harness, analysis.evaluation.rescore
# exercises: analysis.judge.agreement, analysis.judge.client, analysis.judge.prompts, analysis.judge.verdicts
# exercises: analysis.leaderboard, analysis.rendering, analysis.report.analyze, analysis.report.figures
# exercises: analysis.report.registry, analysis.report.sections, analysis.report.summary
# exercises: analysis.runs.activations, analysis.runs.discovery, analysis.runs.identity, analysis.runs.joins
# exercises: analysis.runs.recorded_paths, analysis.runs.records, analysis.runs.tables
# exercises: analysis.self_calibration.compare, analysis.self_calibration.data
# exercises: analysis.self_calibration.example_draw, analysis.self_calibration.loop
# exercises: analysis.self_calibration.results, analysis.self_calibration.train
# exercises: analysis.self_calibration.train_config, capcal_metrics.consistency, capcal_metrics.sequential
# exercises: capcal_models.answer_logprobs, capcal_models.api_requests, capcal_models.batch_size
# exercises: capcal_models.decoding, capcal_models.gguf_header, capcal_models.hf
# exercises: capcal_models.http_transport, capcal_models.kv_cache, capcal_models.loglikelihood
# exercises: capcal_models.prepare, capcal_models.sampling_plan
# exercises: capcal_tasks.calibration_columns, capcal_tasks.checkers, capcal_tasks.data_sources
# exercises: capcal_tasks.relations, capcal_tasks.task_admission

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("analysis", "capcal_metrics", "capcal_models", "capcal_tasks")

# values: frozen, compared and hashed by their fields
FROZEN = """
analysis.applications.budget.MonteCarloAccuracy
analysis.applications.self_calibration_strategies.StrategyInputs
analysis.cli.command.Command
analysis.demo.DemoResult
analysis.demo._DemoTasks
analysis.estimators.consistency.AnswerClasses
analysis.estimators.probes.QuestionSplits
analysis.estimators.probes.ProbeConfig
analysis.estimators.probes.LinearProbe
analysis.estimators.probes._SgdResult
analysis.estimators.recalibration.IsotonicRecalibrator
analysis.evaluation.harness.CheckedInputs
analysis.evaluation.rescore.RescoredRun
analysis.evaluation.rescore.RescoreResult
analysis.judge.client.JudgeRequest
analysis.judge.prompts.JudgePrompt
analysis.judge.verdicts.ParsedVerdict
analysis.leaderboard.BoardColumn
analysis.rendering.Figure
analysis.rendering.ReportFiles
analysis.report.analyze.ReportOptions
analysis.report.figures.Curve
analysis.report.figures.Interval
analysis.report.registry.CalibrationData
analysis.report.registry.Estimator
analysis.report.summary._Candidate
analysis.report.summary.Measured
analysis.runs.activations.PromptActivations
analysis.runs.identity.SamplesFile
analysis.runs.joins.JoinReport
analysis.runs.recorded_paths.ResolvedPath
analysis.self_calibration.compare.Side
analysis.self_calibration.data.TrainingData
analysis.self_calibration.data.CheckedRun
analysis.self_calibration.data.CheckedSides
analysis.self_calibration.example_draw.EpochPlan
analysis.self_calibration.loop._ModelSteps
analysis.self_calibration.results.ComparisonSummary
analysis.self_calibration.train.TrainResult
capcal_metrics.consistency.LeakageFreeConsistency
capcal_models.answer_logprobs.TokenLogprobs
capcal_models.answer_logprobs.PTrue
capcal_models.api_requests.RequestOrigin
capcal_models.batch_size.BatchSizeChoice
capcal_models.decoding.SamplingParams
capcal_models.gguf_header.GGUFHeader
capcal_models.http_transport.RetryPolicy
capcal_models.kv_cache.RowRun
capcal_models.loglikelihood.EncodedRequest
capcal_models.prepare.ModelSpec
capcal_models.prepare.PreparedModel
capcal_tasks.calibration_columns.Column
capcal_tasks.calibration_columns.QuestionData
capcal_tasks.calibration_columns.SourceStatistics
capcal_tasks.calibration_columns.ColumnTable
capcal_tasks.checkers.CheckItem
capcal_tasks.checkers.Verdict
capcal_tasks.checkers.RuleChecker
capcal_tasks.data_sources.HubSplit
capcal_tasks.data_sources.PlannedRead
capcal_tasks.relations.TaskRelation
capcal_tasks.relations.TaskRelations
capcal_tasks.task_admission.Admission
""".split()

# working state compared by identity (``eq=False``); capcal_metrics' plan is frozen as well
IDENTITY = """
capcal_metrics.sequential.SequentialPlan
capcal_models.decoding._Prefill
capcal_models.decoding._Row
capcal_models.decoding._Batch
capcal_models.hf._Pending
capcal_models.http_transport.Job
capcal_models.kv_cache.PromptPrefix
capcal_models.loglikelihood._Prefix
capcal_models.loglikelihood._Sequence
""".split()

# mutable and compared by fields: filled in place by their builders (or not yet made frozen; making one
# frozen moves it to FROZEN)
MUTABLE = """
analysis.demo._DemoRuns
analysis.judge.agreement.RescoreAgreement
analysis.leaderboard.LeaderboardRow
analysis.leaderboard.LeaderboardBoard
analysis.rendering.ReportSection
analysis.report.analyze.ReportData
analysis.report.analyze.SectionResult
analysis.report.analyze.ReportAnalysis
analysis.report.registry.EstimatorContext
analysis.report.registry.EstimatorResult
analysis.report.registry.ComputedEstimators
analysis.report.sections.SectionPart
analysis.report.sections.SectionInputs
analysis.report.summary.Ranking
analysis.runs.discovery._Found
analysis.runs.records.RunRows
analysis.runs.tables.RunCollection
analysis.self_calibration.compare.Comparison
analysis.self_calibration.loop.LoopSettings
analysis.self_calibration.loop.LoopResult
analysis.self_calibration.loop.StepRunner
analysis.self_calibration.train_config.TrainConfig
capcal_models.decoding.PromptJob
capcal_models.http_transport.FailedRequest
capcal_models.http_transport.RunSummary
capcal_models.http_transport._Attempt
capcal_models.http_transport._Run
capcal_models.loglikelihood._Segment
capcal_models.sampling_plan.RepeatGroup
capcal_models.sampling_plan.SamplingSetting
capcal_models.vllm._Job
""".split()

FROZEN_AND_IDENTITY = {"capcal_metrics.sequential.SequentialPlan"}
# vLLM is not installed in the main environment (its own, .venv-vllm, runs the capcal-vllm tests)
NOT_IMPORTABLE_HERE = {"capcal_models.vllm"}


def declared_dataclasses() -> list[str]:
    """Every class of the packages decorated with ``dataclass`` (read from the code, ``ast``)."""
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                    "dataclass" in ast.unparse(decorator) for decorator in node.decorator_list
                ):
                    names.append(f"{module}.{node.name}")
    return names


def load(name: str) -> type:
    module, _, cls = name.rpartition(".")
    if module in NOT_IMPORTABLE_HERE:
        pytest.skip(f"{module} needs vLLM, which the main environment does not hold")
    return getattr(importlib.import_module(module), cls)


def bare(cls: type) -> object:
    """An instance with no field set (``__init__`` skipped): what a flag alone decides is all there is."""
    return object.__new__(cls)


def test_the_mutation_driver_is_told_each_module_this_file_exercises():
    declared = set()
    for line in Path(__file__).read_text(encoding="utf-8").splitlines():
        if line.startswith("# exercises:"):
            declared |= {module.strip() for module in line.removeprefix("# exercises:").split(",")}
    # not capcal_models.vllm: this file cannot import it, so its mutants have no test here ("no tests")
    modules = {name.rpartition(".")[0] for name in FROZEN + IDENTITY + MUTABLE}
    assert declared == modules - NOT_IMPORTABLE_HERE


def test_every_dataclass_of_the_packages_is_classified_once():
    declared = declared_dataclasses()
    listed = FROZEN + IDENTITY + MUTABLE
    assert len(listed) == len(set(listed))
    assert sorted(declared) == sorted(listed), (
        f"not classified: {sorted(set(declared) - set(listed))}; gone: {sorted(set(listed) - set(declared))}"
    )


@pytest.mark.parametrize("name", FROZEN + sorted(FROZEN_AND_IDENTITY))
def test_a_value_record_refuses_assignment_to_each_of_its_fields(name):
    cls = load(name)
    record = bare(cls)
    for field in dataclasses.fields(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field.name, None)


@pytest.mark.parametrize("name", FROZEN)
def test_a_value_record_is_equal_and_hashes_equal_by_its_fields(name):
    cls = load(name)
    first, second = bare(cls), bare(cls)
    for field in dataclasses.fields(cls):  # equal field values, distinct objects
        object.__setattr__(first, field.name, ("same", field.name))
        object.__setattr__(second, field.name, ("same", field.name))
    assert first is not second
    assert first == second
    assert hash(first) == hash(second)


@pytest.mark.parametrize("name", IDENTITY)
def test_working_state_is_equal_only_to_itself(name):
    cls = load(name)
    first, second = bare(cls), bare(cls)
    # fields unset: a field-wise __eq__ would read them (AttributeError) or find the two equal
    assert first == first
    assert first != second
    assert hash(first) != hash(second)
    items = [first, second]
    items.remove(second)
    assert items == [first] and items[0] is first


@pytest.mark.parametrize("name", MUTABLE)
def test_a_mutable_record_takes_assignment_and_compares_by_its_fields(name):
    cls = load(name)
    first, second = bare(cls), bare(cls)
    for field in dataclasses.fields(cls):
        setattr(first, field.name, ("same", field.name))
        setattr(second, field.name, ("same", field.name))
    assert first == second
