"""Hypothesis budgets for et_copy's fuzz tests, importable without torch or
et_copy (conftest.py loads it at collection, before any test decides what
to import)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE_ENV = "ET_COPY_FUZZ_PROFILE"
# cases per fuzz test
PROFILES = {"ci": 500, "long": 10_000, "dev": 50}
# One per fuzz test, as the session summary counts them (docs/reliability.md
# names them; tests/python/repo/test_doc_figures.py checks it does).
KINDS = ("public/direct", "public/registered", "hand-built DeviceTensor")


def register_profiles() -> None:
    """ "ci" (default) runs 500 cases per fuzz test, "long" 10,000 (select
    with ET_COPY_FUZZ_PROFILE=long), "dev" 50."""
    for name, n in PROFILES.items():
        settings.register_profile(
            name,
            max_examples=n,
            deadline=None,
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        )


def profile_name() -> str:
    name = os.environ.get(PROFILE_ENV, "ci")
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={name!r}: choose one of {', '.join(PROFILES)}")
    return name
