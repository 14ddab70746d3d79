"""Structural checks whose failure message says how to fix it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.core.management import call_command

from executions import sql

MIGRATIONS = Path(__file__).resolve().parents[2] / "executions" / "migrations"


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_the_migrations_install_the_admission_function_the_code_builds():
    latest = None
    for path in sorted(MIGRATIONS.glob("0*.py")):
        module = importlib.import_module(f"executions.migrations.{path.stem}")
        if "FUNCTION mantle_admit(" in getattr(module, "ADMIT_FUNCTION", ""):
            latest = module
    assert latest is not None, "no migration installs mantle_admit"
    assert latest.ADMIT_FUNCTION.strip() == sql.ADMIT_FUNCTION.strip(), (
        "executions/sql/ builds a different mantle_admit than the migrations install: add a "
        "migration that runs the new sql.ADMIT_FUNCTION (frozen as a literal), like 0004"
    )


def test_the_migrations_install_the_limit_aware_claim_the_code_builds():
    latest = None
    for path in sorted(MIGRATIONS.glob("0*.py")):
        module = importlib.import_module(f"executions.migrations.{path.stem}")
        if "FUNCTION mantle_claim_limited(" in getattr(module, "CLAIM_LIMITED_FUNCTION", ""):
            latest = module
    assert latest is not None, "no migration installs mantle_claim_limited"
    assert latest.CLAIM_LIMITED_FUNCTION.strip() == sql.CLAIM_LIMITED_FUNCTION.strip(), (
        "executions/sql/ builds a different mantle_claim_limited than the migrations install: "
        "add a migration that runs the new sql.CLAIM_LIMITED_FUNCTION (frozen as a literal)"
    )


@pytest.mark.parametrize(
    ("name", "frozen"),
    [
        ("mantle_fair_heads", "FAIR_HEADS_FUNCTION"),
        ("mantle_queued_turn", "QUEUED_TURN_FUNCTION"),
        ("mantle_promotion_owed", "PROMOTION_OWED_FUNCTION"),
    ],
)
def test_the_migrations_install_the_promotion_functions_the_code_builds(name, frozen):
    latest = None
    for path in sorted(MIGRATIONS.glob("0*.py")):
        module = importlib.import_module(f"executions.migrations.{path.stem}")
        if f"FUNCTION {name}(" in getattr(module, frozen, ""):
            latest = module
    assert latest is not None, f"no migration installs {name}"
    assert getattr(latest, frozen).strip() == getattr(sql, frozen).strip(), (
        f"executions/sql/ builds a different {name} than the migrations install: add a "
        f"migration that runs the new sql.{frozen} (frozen as a literal), like 0025"
    )
