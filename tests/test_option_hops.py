"""Each option goes from the command line to its use in a few hops, never back to a file it left, and
the policy file is read once a run (issue 43: ``--confirm-budget`` took 7 hops and came back to
pipeline.py; ``--policy`` was parsed three times).

Traced, not read: a real ``netbench sweep`` (CliRunner, in this process; its ranks are real processes
on this machine, ``--launcher local``) runs with each use point wrapped. At a use the call stack is
read from the click command down: a *hop* is a call that has the value among its arguments (the
option's leaf, its branch record or the whole ``Options`` tree; ``self`` is the callee's own state,
not a value passed on, and a record other than the options that holds one, as the stage policy
``run_stages`` calls back or the ``PlanRequest`` the planner reads, is not the value either). The
hops are those calls, the use's own call included; the files they are in, in order, must not come
back to one already left. Today: --confirm-budget sweep.dispatch -> pipeline.run_pipeline ->
pipeline.confirm -> confirm.Budget; --timeout sweep.dispatch -> pipeline.run_pipeline ->
pipeline.plan_run -> collectives.plan.WorkerPlan; --policy ReportOptions -> load_policy, once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from click.testing import CliRunner

BUDGET_S, TIMEOUT_S = 7.0, 37.0  # given, so each is one float object from click to its use


@dataclass
class Trace:
    """The options tree a command built, and the stacks seen at each use."""

    tree: Any = None
    resolved: list[Any] = field(default_factory=list)  # what RetestOptions.seconds gave
    stacks: dict[str, list[list[tuple[str, str, list[Any]]]]] = field(default_factory=dict)

    def seen(self, use: str, args: list[Any]) -> None:
        """The frames from the click command (``netbench.commands.*``'s ``command``) down to the
        caller of ``use``, each with its arguments, then the use's own call."""
        frames: list[FrameType] = []
        frame = sys._getframe(2)
        while frame is not None and not _is_command(frame):
            frames.append(frame)
            frame = frame.f_back
        assert frame is not None, f"{use} was not reached from a command"
        stack = [_call(f) for f in reversed(frames)]
        self.stacks.setdefault(use, []).append(stack + [(use.rsplit(".", 1)[0], use, args)])


def _is_command(frame: FrameType) -> bool:
    return frame.f_code.co_name == "command" and frame.f_globals["__name__"].startswith("netbench.commands.")


def _call(frame: FrameType) -> tuple[str, str, list[Any]]:
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    args = [frame.f_locals.get(n) for n in names if n not in ("self", "cls")]
    if code.co_flags & 0x08:  # **kw: its values are arguments too
        args += list((frame.f_locals.get(code.co_varnames[len(names) + bool(code.co_flags & 0x04)]) or {})
                     .values())
    return frame.f_globals.get("__name__", "?"), code.co_qualname, args


def _hops(stack: list[tuple[str, str, list[Any]]], value: list[Any]) -> list[tuple[str, str]]:
    """The calls of ``stack`` whose arguments hold one of ``value`` (by identity)."""
    return [(module, name) for module, name, args in stack if any(a is v for a in args for v in value)]


def _no_return(hops: list[tuple[str, str]]) -> bool:
    files = [module for module, _ in hops]
    left = [m for i, m in enumerate(files) if i == 0 or m != files[i - 1]]
    return len(left) == len(set(left))


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Trace:
    from netbench.collectives.plan import WorkerPlan
    from netbench.reports import engine, policy

    from netbench.confirm.budget import Budget
    from netbench.run import options

    trace = Trace()
    built = options.from_command_line

    def from_command_line(record: type, given: Any) -> Any:
        trace.tree = built(record, given)
        return trace.tree

    seconds = options.RetestOptions.seconds

    def resolved(self: Any, hosts: int) -> float:
        trace.resolved.append(seconds(self, hosts))
        return trace.resolved[-1]

    def wrap(use: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def at_use(*args: Any, **kw: Any) -> Any:
            trace.seen(use, [*args, *kw.values()])
            return real(*args, **kw)

        return at_use

    monkeypatch.setattr(options, "from_command_line", from_command_line)
    monkeypatch.setattr(options.RetestOptions, "seconds", resolved)
    monkeypatch.setattr(Budget, "__init__", wrap("netbench.confirm.budget.Budget", Budget.__init__))
    plan = "netbench.collectives.plan.WorkerPlan"
    monkeypatch.setattr(WorkerPlan, "__init__", wrap(plan, WorkerPlan.__init__))
    load = policy.load_policy
    monkeypatch.setattr(policy, "load_policy", wrap("netbench.reports.policy.load_policy", load))
    monkeypatch.setattr(engine, "load_policy", wrap("netbench.reports.policy.load_policy", load))
    return trace


def _sweep(tmp_path: Path, *more: str) -> None:
    from netbench.commands.sweep import command

    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h0\nh1\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("[thresholds]\nmin_partners = 1\n")
    argv = ["--launcher", "local", "--hosts", str(hosts), "--pattern", "pairwise", "--pair-sizes", "64K",
            "-k", "all_reduce", "-n", "2", "-w", "1", "--no-inventory", "--timeout", f"{TIMEOUT_S:g}",
            "--policy", str(policy), "--out", str(tmp_path / "run"), *more]
    res = CliRunner().invoke(command, argv, catch_exceptions=False)
    assert res.exit_code in (0, 1, 2), res.output  # a verdict: the run went to its end


def test_confirm_budget_timeout_and_policy_reach_their_use_in_four_hops(traced: Trace,
                                                                        tmp_path: Path) -> None:
    _sweep(tmp_path, "--confirm-budget", f"{BUDGET_S:g}")
    opts = traced.tree
    assert opts is not None and opts.retest.confirm_budget_s == BUDGET_S

    budget = [opts, opts.retest, opts.retest.confirm_budget_s, *traced.resolved]
    (stack,) = traced.stacks["netbench.confirm.budget.Budget"]  # the re-tests' one budget
    hops = _hops(stack, budget)
    assert hops[-1][1] == "netbench.confirm.budget.Budget" and len(hops) <= 4 and _no_return(hops), hops

    timeout = [opts, opts.measure, opts.measure.timeout_s]
    first = traced.stacks["netbench.collectives.plan.WorkerPlan"][0]  # the run's plan (re-tests plan again)
    hops = _hops(first, timeout)
    assert hops[-1][1] == "netbench.collectives.plan.WorkerPlan" and len(hops) <= 4 and _no_return(hops), hops

    (stack,) = traced.stacks["netbench.reports.policy.load_policy"]  # read once: the report and re-tests too
    hops = _hops(stack, [opts.report.policy])
    assert len(hops) <= 4 and _no_return(hops), hops
    assert opts.report.rules.thresholds.min_partners == 1  # what the report and the re-tests were given


def test_the_policy_is_read_once_by_preflight(traced: Trace, tmp_path: Path) -> None:
    """Preflight reads the policy as its options are built; its stages and report take the parsed one.
    Here it stops at its quick pass's budget check (no hosts answer), after the policy was needed."""
    from netbench.commands.preflight import command

    hosts = tmp_path / "hosts.txt"
    hosts.write_text("h0\nh1\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("[thresholds]\nmin_partners = 1\n")
    argv = ["--hosts", str(hosts), "--policy", str(policy), "--budget", "1", "--out", str(tmp_path / "run")]
    CliRunner().invoke(command, argv)
    assert traced.tree is not None and traced.tree.report.rules.thresholds.min_partners == 1
    assert len(traced.stacks.get("netbench.reports.policy.load_policy", [])) == 1
