"""exercises/ is exactly what `make stubs` writes, imports cleanly, and raises where work is due."""

import inspect

import pytest
import torch
import torch.nn as nn

from grader.authoring.stubs import MarkerError, expected_exercises, render_stub
from grader.core.stages import STAGE_MODULES
from tests.conftest import REPO
from tests.example_calls import CLASSES, CONSTRUCTOR_ARGS, FORWARD_INPUT_SHAPE, FUNCTIONS, call_function


def test_exercises_are_what_make_stubs_writes():
    expected = expected_exercises()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in (REPO / "exercises").glob("*.py")}
    assert set(on_disk) == set(expected), "exercises/ and solutions/ hold different files"
    stale = [name for name in expected if on_disk[name] != expected[name]]
    assert not stale, (
        f"exercises/ differs from what `make stubs` writes for {stale}. Maintainers: run `make stubs`. "
        "Learners: this is expected once you edit exercises/; `make test` checks the repository itself."
    )


def test_example_calls_cover_every_public_name(solutions):
    public = {
        name
        for module in solutions.modules.values()
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__
    }
    assert public == set(FUNCTIONS) | set(CLASSES)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_stub_function_raises_not_implemented_naming_itself_and_its_guide(name, exercises, solutions):
    with pytest.raises(NotImplementedError) as raised:
        call_function(exercises, name, reference=solutions)
    message = str(raised.value)
    assert name in message and "docs/stage" in message and "make grade" in message


@pytest.mark.parametrize("name", CLASSES)
def test_stub_class_raises_when_built_and_when_called(name, exercises):
    cls = exercises.name(name)
    with pytest.raises(NotImplementedError, match=f"{name}.__init__"):
        cls(*CONSTRUCTOR_ARGS[name])
    bare = cls.__new__(cls)
    nn.Module.__init__(bare)  # skip the stub __init__ to reach forward
    with pytest.raises(NotImplementedError, match=f"{name}.forward"):
        bare(torch.rand(*FORWARD_INPUT_SHAPE[name]))


def test_stubs_import_their_other_stages_from_exercises():
    stage5 = (REPO / "exercises" / f"{STAGE_MODULES[5]}.py").read_text()
    assert "from exercises.stage4_causal_attention import CausalAttention" in stage5
    for path in (REPO / "exercises").glob("*.py"):
        text = path.read_text()
        assert "solutions" not in text, f"{path.name} mentions solutions"
        assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_stubs_keep_docstrings_and_signatures(exercises, solutions):
    for stage, module in solutions.modules.items():
        stub = exercises.modules[stage]
        assert inspect.getdoc(stub) == inspect.getdoc(module)
        for name in FUNCTIONS + CLASSES:
            if hasattr(module, name):
                assert inspect.getdoc(getattr(stub, name)) == inspect.getdoc(getattr(module, name))


SOLUTION = '''"""Doc."""

import torch
from solutions.stage1_softmax import softmax_naive


def f(x):
    """Doc of f."""
    y = 1
    ### BEGIN SOLUTION
    return x + y
    ### END SOLUTION


class C:
    def method(self):
        ### BEGIN SOLUTION
        return 2
        ### END SOLUTION
'''


def test_render_replaces_regions_and_keeps_the_rest():
    stub = render_stub(SOLUTION, "solutions/stage7_demo.py")
    assert "from exercises.stage1_softmax import softmax_naive" in stub
    assert '"""Doc of f."""\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError(' in stub
    assert "f is not implemented yet" in stub and "C.method is not implemented yet" in stub
    assert "docs/stage7.md" in stub
    assert "return x + y" not in stub and "return 2" not in stub


@pytest.mark.parametrize(
    "broken, complaint",
    [
        (SOLUTION.replace("    ### END SOLUTION\n\n\nclass", "\n\nclass", 1), "inside the region"),
        (SOLUTION.replace("        ### BEGIN SOLUTION\n", "", 1), "without a"),
        (SOLUTION.rsplit("        ### END SOLUTION", 1)[0], "never closed"),
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "outside a function"),
    ],
)
def test_render_refuses_malformed_markers(broken, complaint):
    with pytest.raises(MarkerError, match=complaint):
        render_stub(broken, "solutions/stage7_demo.py")


def test_render_refuses_unnamed_modules():
    with pytest.raises(MarkerError, match="stage<N>"):
        render_stub("def f():\n    pass\n", "solutions/helpers.py")
