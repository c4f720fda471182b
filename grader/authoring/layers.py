"""The grader's layers, bottom to top: each imports only the layers below it (and itself).

    runner     what runs beside learner code, inside the sandbox: imports nothing outside itself
    core       stages, points, course settings, hints, options, the report model: standard library only
    intake     reading a submission, a class folder as an LMS laid it out, submission times
    sandbox    the judge's side of the confined workers: the zygote, the workers, what they printed
    judge      a grading session: the pytest plugin, the checks, verdicts, diagnosis, evidence
    views      a report as people read it: terminal, HTML, student view, Gradescope, GitHub Classroom
    classroom  a class: the plan of whom to grade, lanes, the gradebook, LMS exports, similarity
    cli        one module per command, thin; grader/__main__.py and grader/notebook.py stand with it
    authoring  what instructors build: the release, the Gradescope zip, the nbgrader course

Nothing imports cli or authoring; tests/test_layers.py reads every import and holds the rule, and what an
artefact ships follows it (grader/authoring/shipping.py).
"""

LAYERS = ("runner", "core", "intake", "sandbox", "judge", "views", "classroom", "cli", "authoring")
# Modules directly in grader/: the entry points, at the rank of cli (the package's own __init__ is empty).
ENTRY_POINTS = {"grader.__main__": "cli", "grader.notebook": "cli", "grader": "core"}
# Layers an artefact that grades one submission ships whole (the release, the Gradescope zip): the judge's
# checks follow its visible-only rewrite instead, and cli the commands its users run.
GRADING_LAYERS = ("runner", "core", "intake", "sandbox", "views")


def layer_of(module: str) -> str:
    """The layer of the grader module ``module`` (dotted)."""
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    return module.split(".")[1]


def may_import(importer: str, imported: str) -> bool:
    """Whether grader module ``importer`` may import grader module ``imported``."""
    own, other = layer_of(importer), layer_of(imported)
    if imported == "grader":
        return True
    if own == "runner":
        return other == "runner"
    return LAYERS.index(other) <= LAYERS.index(own) and (other not in ("cli", "authoring") or other == own)


def violations(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Each import of ``graph`` (grader.authoring.imports.import_graph) that breaks the layer rule, as
    "importer:line imports module (layer a may not import layer b)"."""
    found = []
    for importer, imports in graph.items():
        for module, line in imports:
            if module.split(".")[0] == "grader" and not may_import(importer, module):
                found.append(
                    f"{importer}:{line} imports {module} ({layer_of(importer)} may not import {layer_of(module)})"
                )
    return found


def cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Every circle of imports among the modules of ``graph``, each as the modules along it (Tarjan's
    strongly connected components of more than one module, or of one that imports itself)."""
    edges = {
        module: sorted(
            {target for target, _ in imports if target in graph and target != module}
            | ({module} if any(target == module for target, _ in imports) else set())
        )
        for module, imports in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in edges[module]:
                found.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found
