"""grader.authoring.shipping: an artefact ships what its entry points import, and stops on what it cannot."""

import pytest

from grader.authoring.shipping import ShippingError, closure, data_files, script_modules, shipment


@pytest.fixture
def tree(tmp_path):
    """A toy repository: a grader package whose modules import one another in each way the grader does."""
    files = {
        "grader/__init__.py": "",
        "grader/__main__.py": "from grader.cli import main\n",
        "grader/cli.py": "def main():\n    from grader.later import run  # only when called\n    return run()\n",
        "grader/later.py": (
            "from grader.sub import helper\nimport grader.spelled.out\n"
            "WORKER = ['python', '-m', 'grader.sub.worker']  # a module run by name\n"
            "DATA = 'table.toml'\ndef run():\n    return helper\n"
        ),
        "grader/spelled/__init__.py": "",
        "grader/spelled/out.py": "from . import sibling\n",
        "grader/spelled/sibling.py": "",
        "grader/sub/__init__.py": "",
        "grader/sub/helper.py": "",
        "grader/sub/worker.py": "",
        "grader/sub/settings.ini": "",
        "grader/table.toml": "",
        "grader/unused.toml": "",
        "grader/hidden_only.py": "",
        "grader/checks.py": "from grader.hidden_only import secret\nfrom grader.sub import helper\n",
        "grader/authoring.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_closure_follows_every_kind_of_import(tree):
    shipped = closure(["grader.__main__"], root=tree)
    assert sorted(shipped) == [
        "grader",
        "grader.__main__",
        "grader.cli",
        "grader.later",
        "grader.spelled",
        "grader.spelled.out",
        "grader.spelled.sibling",
        "grader.sub",
        "grader.sub.helper",
        "grader.sub.worker",
    ]
    assert [path.name for path in data_files(shipped, root=tree)] == ["table.toml"]  # named; unused.toml is not


def test_a_module_given_as_text_ships_what_the_text_imports(tree):
    """A check module rewritten without its hidden checks: what only those imported stays behind."""
    files = shipment(["grader.checks"], {"grader.checks": "from grader.sub import helper\n"}, root=tree)
    assert "grader/hidden_only.py" not in files and files["grader/checks.py"] == b"from grader.sub import helper\n"
    assert "grader/hidden_only.py" in shipment(["grader.checks"], root=tree)


def test_an_import_that_resolves_to_no_file_stops_the_build(tree):
    (tree / "grader" / "cli.py").write_text("def main():\n    from grader.gone import x\n")
    with pytest.raises(ShippingError, match=r"grader/cli\.py:2 imports grader\.gone, which is no file"):
        closure(["grader.__main__"], root=tree)


def test_a_module_the_artefact_must_never_hold_stops_the_build(tree):
    (tree / "grader" / "sub" / "helper.py").write_text("import grader.authoring\n")
    with pytest.raises(
        ShippingError,
        match=r"grader/sub/helper\.py:1 imports grader\.authoring, which this "
        r"artefact must never ship",
    ):
        closure(["grader.__main__"], never=("grader.authoring",), root=tree)


def test_scripts_name_the_modules_they_run():
    script = (
        'PYTHONPATH=x "$PYTHON" -m grader "$ROOT/submission"\npython - <<PY\nfrom grader.sandbox.zygote import X\nPY\n'
    )
    assert script_modules(script) == ["grader.__main__", "grader.sandbox.zygote"]
    assert script_modules("$(PY) -m grader.authoring.release dist/student") == ["grader.authoring.release"]
