from __future__ import annotations

import pkgutil

import engine.actions
from workflows.actions import action_names
from workflows.schema import parse_workflow


def test_every_module_of_engine_actions_is_a_known_action() -> None:
    modules = [info.name for info in pkgutil.iter_modules(engine.actions.__path__)]
    names = {getattr(engine.actions, module).NAME for module in modules}
    assert len(names) == len(modules)
    assert action_names() == names


def test_the_validator_knows_the_actions_the_engine_registered() -> None:
    for name in sorted(action_names()):
        step = f"name: w\nsteps: [{{name: a, action: {name}}}]\n"
        assert parse_workflow(step).steps[0].action == name
