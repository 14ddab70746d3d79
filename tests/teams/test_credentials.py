"""make run's credentials (teams.credentials): `mantle seed-demo` run again keeps the key and the
password that work, replaces only what does not, and resets nothing the user changed; `mantle
admin reset-password` prints a new password and saves it."""

from __future__ import annotations

import stat

import pytest
from django.contrib.auth.models import User

from teams.credentials import credentials_path, credentials_read
from teams.models import ApiKey
from teams.services import api_key_revoke
from tests.commands import exit_code, run


@pytest.fixture(autouse=True)
def home(settings, tmp_path):
    """The credentials file in a home of the test's own, not the project's .mantle/."""
    settings.MANTLE_HOME = tmp_path
    return tmp_path


def working(key: str) -> bool:
    return ApiKey.objects.filter(key_hash=ApiKey.hash(key), revoked_at=None).exists()


def signs_in(password: str) -> bool:
    return User.objects.get(username="admin").check_password(password)


@pytest.mark.django_db
def test_the_first_seed_saves_a_key_and_a_password_for_its_owner_only(home):
    out = run("mantle_seed_demo")
    saved = credentials_read()
    assert f"API key (new): {saved['MANTLE_KEY']}" in out
    assert f"as admin / {saved['MANTLE_ADMIN_PASSWORD']}" in out
    assert f"credentials saved in {home / 'credentials'}" in out
    assert stat.S_IMODE(credentials_path().stat().st_mode) == 0o600
    assert working(saved["MANTLE_KEY"]) and signs_in(saved["MANTLE_ADMIN_PASSWORD"])
    assert saved["MANTLE_URL"] == "http://127.0.0.1:8000/"


@pytest.mark.django_db
def test_seeding_again_keeps_the_key_and_the_password():
    run("mantle_seed_demo")
    first = credentials_read()
    again = run("mantle_seed_demo")
    assert credentials_read() == first
    assert "(password unchanged)" in again and "credentials unchanged in" in again
    assert first["MANTLE_KEY"] not in again and first["MANTLE_ADMIN_PASSWORD"] not in again
    assert ApiKey.objects.count() == 1
    assert working(first["MANTLE_KEY"]) and signs_in(first["MANTLE_ADMIN_PASSWORD"])


@pytest.mark.django_db
def test_a_revoked_key_is_replaced_and_a_changed_password_left_alone():
    run("mantle_seed_demo")
    first = credentials_read()
    api_key_revoke(api_key=ApiKey.objects.get())
    admin = User.objects.get(username="admin")
    admin.set_password("chosen by the user")
    admin.save()
    out = run("mantle_seed_demo")
    now = credentials_read()
    assert now["MANTLE_KEY"] != first["MANTLE_KEY"] and working(now["MANTLE_KEY"])
    assert f"API key (new): {now['MANTLE_KEY']}" in out
    assert "MANTLE_ADMIN_PASSWORD" not in now  # no longer true, so no longer there
    assert "the password of admin was changed" in out
    assert signs_in("chosen by the user")


@pytest.mark.django_db
def test_reset_password_prints_and_saves_a_new_one():
    run("mantle_seed_demo")
    old = credentials_read()["MANTLE_ADMIN_PASSWORD"]
    out = run("mantle_admin", "reset-password").splitlines()
    new = credentials_read()["MANTLE_ADMIN_PASSWORD"]
    assert out[0] == f"new password for admin: {new}"
    assert out[1] == f"saved in {credentials_path()}"
    assert signs_in(new) and not signs_in(old)
    assert stat.S_IMODE(credentials_path().stat().st_mode) == 0o600
    assert exit_code("mantle_admin", "reset-password", "nobody") == 2


@pytest.mark.django_db
def test_another_users_new_password_is_printed_not_saved(make_user):
    run("mantle_seed_demo")
    saved = credentials_read()
    make_user("bob")
    out = run("mantle_admin", "reset-password", "bob").splitlines()
    assert len(out) == 1 and out[0].startswith("new password for bob: ")
    assert User.objects.get(username="bob").check_password(out[0].split(": ")[1])
    assert credentials_read() == saved
