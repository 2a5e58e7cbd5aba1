"""The ``capcal`` command line: a thin layer over capcal's Python API, one module per command.

capcal eval [lm_eval flags] [--repeats K] [--data_dir DIR] [--plain_prompts]
                                                              -> analysis.evaluation.evaluate
    (exit status 2 for an input that cannot work, found before a model is loaded; 1 when the run failed;
    3 when API requests still failed after their retries: the message says how to resume)
capcal tasks-dir                                              -> capcal_tasks.tasks_dir
capcal models prepare NAME [--force] | list | path NAME       -> capcal_models.prepare
capcal analyze OUTPUT_DIR [--output FILE]                     -> analysis.runs
capcal check OUTPUT_DIR...                                    -> analysis.runs.completeness.check_run
capcal report OUTPUT_DIR... [--output DIR] [--activations DIR] [--calibration TASK=SPLIT[,SPLIT]]
                                                              -> analysis.report.build_report
capcal table OUTPUT_DIR... [--metric M]... [--format markdown|latex|csv|json] [--output FILE]
                                                              -> analysis.report.paper_table
capcal leaderboard OUTPUT_DIR... --output DIR                 -> analysis.leaderboard
capcal rescore OUTPUT_DIR --checker NAME [--output DIR] [--tasks T,..] [--run RUN] [judge options]
                                                              -> analysis.evaluation.rescore.rescore
capcal demo [options]                                         -> analysis.demo.run_demo
capcal selfcal data|train|compare|run [options]               -> analysis.self_calibration

Layout: ``main.py`` holds the table of commands (``COMMANDS``), builds the parser from it and dispatches with
the shared error handling; ``command.py`` says what a command is; one module per command (``eval_command.py``,
``tasks_dir.py``, ``models.py``, ``analyze.py``, ``check.py``, ``report.py``, ``table.py``,
``leaderboard.py``, ``rescore.py``, ``demo.py``, ``selfcal.py``); ``arguments.py`` holds the flag parsing they
share and ``logging_setup.py`` a run's logging.
"""

from analysis.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
