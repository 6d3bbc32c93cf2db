"""The one engine: every command that measures assembles its run here.

``stages.run_stages`` is the run, its stages written once (open -> inventory and switches -> plan ->
counters -> the first launch -> re-tests -> counters -> report -> status, a stop at any of them
recorded by the command's own words); a command says what each stage does for it with a
``stages.StagePolicy`` (sweep's is ``pipeline.SweepStages``, preflight's
``preflight.stages.PreflightStages``). Every launch of ranks in a run, the first and each re-test,
is a ``launch.Launch``, the one caller of ``run.execute.execute`` (tests/test_one_engine.py).
"""
