"""RetentionPolicy validation: bad policies are refused with messages naming the option."""

from __future__ import annotations

from datetime import timedelta

import pytest

from slidewin.jobs.config import RetentionPolicy
from slidewin.jobs.errors import PolicyError

S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "--history and --max-rows are both missing or zero"),
        ({"history": timedelta(0), "max_rows": 0}, "both missing or zero"),  # VoltDB empties
        ({"history": None, "max_rows": 0}, "both missing or zero"),
        ({"history": 30 * S, "chunk": 0}, "--chunk 0 must be from 1"),
        ({"history": 30 * S, "chunk": -5}, "--chunk -5"),
        ({"history": 30 * S, "chunk": 2_000_000}, "--chunk 2000000"),
        ({"history": -S}, "--history -1 day"),
        ({"max_rows": -1}, "--max-rows -1 is negative"),
        ({"max_rows": 1.5}, "--max-rows 1.5 is not a whole number"),
        ({"history": "30s"}, "--history '30s' is not a duration"),
        ({"history": 30 * S, "yield_": -S}, "--yield"),
        ({"history": 30 * S, "yield_": timedelta(hours=2)}, "--yield"),
        ({"history": 30 * S, "split": "odd"}, "split 'odd'"),
        ({"history": 30 * S, "workers": 0}, "--workers 0 must be from 1 to 16"),
    ],
)
def test_bad_policies_are_refused_naming_the_option(kwargs, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(")):
        RetentionPolicy(**kwargs)


def test_policy_errors_are_config_errors_with_exit_code_2():
    with pytest.raises(PolicyError) as info:
        RetentionPolicy()
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    "policy",
    [
        RetentionPolicy(history=30 * S),
        RetentionPolicy(max_rows=1000, chunk=7, yield_=timedelta(milliseconds=5), split="even"),
        RetentionPolicy(history=timedelta(milliseconds=1500), max_rows=10, yield_=timedelta(0)),
    ],
)
def test_policy_round_trips_through_job_kwargs(policy):
    kwargs = policy.as_kwargs()
    assert all(isinstance(v, (int, float, str, type(None))) for v in kwargs.values())
    assert RetentionPolicy.from_kwargs(kwargs) == policy


def test_zero_limit_next_to_a_real_one_means_no_limit():
    policy = RetentionPolicy(history=timedelta(0), max_rows=500)
    assert policy.history_limit is None and policy.row_limit == 500
    assert "history" not in policy.describe()
