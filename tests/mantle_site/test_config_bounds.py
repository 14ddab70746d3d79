"""mantle.yaml's numbers and durations have the bounds of everything else that enters
(docs/hostile-input.md, Bounds): past them, start-up stops naming the key."""

from __future__ import annotations

import pytest

from mantle_site.config import ConfigError, load_config


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("engine.step_lease", "99999999999h"),
        ("engine.reaper_interval", "721h"),
        ("engine.queue_poll_interval", "1e400"),
        ("engine.max_concurrent_executions_per_team", str(2**31)),
        ("engine.slots_per_worker", str(10**20)),
        ("limits.expression_cost", "9" * 5000),
    ],
)
def test_a_value_past_its_bound_stops_start_up_naming_the_key(tmp_path, key, value) -> None:
    section, name = key.split(".")
    path = tmp_path / "mantle.yaml"
    path.write_text(f"{section}:\n  {name}: '{value}'\n")
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path, environ={})
