"""Hidden checks draw their inputs from a grading's secret key and the submission (grader.judge.drawn_inputs):
what one submission learns of them fits no other, a regrade of the same bytes draws the same, and visible
checks draw what the release's checks draw."""

import json
import zipfile
from pathlib import Path

import pytest

from grader.core.inputs_key import KEY_FILE, key_id, read_key
from grader.intake.submission import SubmissionFiles
from grader.judge import drawn_inputs
from tests.conftest import REPO
from tests.grading import batch, batch_run, grade, grade_run, learner_copy

# Scores divided by d_k, not its root, in SelfAttention_v1 alone: every result check of it fails, each message
# quoting numbers of its own inputs.
SCALED_BY_D_K = ("attn_scores / keys.shape[-1] ** 0.5", "attn_scores / keys.shape[-1]")
HIDDEN, VISIBLE = "random.SelfAttention_v1", "document.SelfAttention_v1"


def wrong_stage2(folder: Path, comment: str = "") -> Path:
    learner_copy(folder, stages=[2])
    path = folder / "stage2_self_attention.py"
    path.write_text(path.read_text().replace(*SCALED_BY_D_K, 1) + comment)
    return folder


def message(report: dict, check: str) -> str:
    found = [c for s in report["stages"] for c in s["checks"] if c["id"] == check]
    assert len(found) == 1 and found[0]["status"] == "failed", found
    return found[0]["message"]


def reports(out: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted((out / "students").glob("*.json"))}


def test_a_salt_is_the_key_and_the_submissions_bytes():
    one, other = SubmissionFiles({"stage1_softmax.py": b"a"}), SubmissionFiles({"stage1_softmax.py": b"b"})
    assert drawn_inputs.student_salt(b"", one) == b""  # unkeyed: the check's name alone
    salts = {drawn_inputs.student_salt(key, files) for key in (b"k1", b"k2") for files in (one, other)}
    assert len(salts) == 4
    assert drawn_inputs.student_salt(b"k1", one) == drawn_inputs.student_salt(b"k1", SubmissionFiles(dict(one.files)))
    try:
        unkeyed = drawn_inputs.seed("random.x")
        drawn_inputs.use(drawn_inputs.student_salt(b"k1", one))
        keyed = drawn_inputs.seed("random.x")
        assert keyed != unkeyed and keyed != drawn_inputs.seed("random.y") and 0 <= keyed < 2**63
    finally:
        drawn_inputs.use(b"")
    assert drawn_inputs.seed("random.x") == unkeyed


def test_a_key_file_is_made_once_read_after_and_refused_when_broken(tmp_path):
    path = tmp_path / "state" / KEY_FILE
    key = read_key(path, make=True)
    assert len(key) == 32 and path.stat().st_mode & 0o777 == 0o600
    assert read_key(path) == read_key(path, make=True) == key
    assert key_id(key) != key_id(read_key(tmp_path / "other", make=True)) and key.hex() not in key_id(key)
    path.write_text("not a key\n")
    with pytest.raises(ValueError, match=KEY_FILE):
        read_key(path, make=True)
    assert path.read_text() == "not a key\n"  # named, never replaced
    with pytest.raises(ValueError, match="no such key file"):
        read_key(tmp_path / "missing")


@pytest.fixture(scope="module")
def keyed_class(tmp_path_factory):
    """The same wrong file handed in by ada and cy, and by bo with a comment more; graded in two classes (two
    keys), and once unkeyed as its learner grades it."""
    root = tmp_path_factory.mktemp("keyed")
    for student, comment in (("ada", ""), ("bo", "\n# checked twice\n"), ("cy", "")):
        wrong_stage2(root / "class" / student, comment)
    batch(root / "class", root / "out1")
    batch(root / "class", root / "out2")
    _, alone = grade(root / "class" / "ada", "--stage", "2")
    return root, reports(root / "out1"), reports(root / "out2"), alone


def test_hidden_inputs_follow_the_submission_and_the_key(keyed_class):
    _, first, second, alone = keyed_class
    ada, bo, cy = (first[s] for s in ("ada", "bo", "cy"))
    assert message(ada, HIDDEN) == message(cy, HIDDEN)  # the same bytes: the same inputs
    assert message(ada, HIDDEN) != message(bo, HIDDEN)  # a comment more: other inputs
    assert message(ada, HIDDEN) != message(second["ada"], HIDDEN)  # another class's key: other inputs
    assert message(ada, HIDDEN) != message(alone, HIDDEN)  # unkeyed, as the learner grades it: other inputs
    for report in (bo, cy, second["ada"], alone):  # the visible checks draw what the release's do
        assert message(report, VISIBLE) == message(ada, VISIBLE)
    verdicts = {
        json.dumps(
            [
                (c["id"], c["status"], c["score"], c["hint"])
                for s in r["stages"]
                if s["id"] == "stage2"
                for c in s["checks"]
            ]
        )
        for r in (ada, bo, cy, second["ada"], alone)
    }
    assert len(verdicts) == 1 and "wrong-scaling" in next(iter(verdicts))  # one mistake, one verdict, any inputs


def test_the_key_stays_with_the_grader_and_a_regrade_keeps_it(keyed_class):
    root, first, _, _ = keyed_class
    out = root / "out1"
    key = (out / ".grader" / KEY_FILE).read_text().strip()
    assert len(key) == 64 and (out / ".grader" / KEY_FILE).stat().st_mode & 0o777 == 0o600
    for path in out.rglob("*"):
        if path.is_file() and path.name != KEY_FILE:
            assert key not in path.read_text(errors="replace"), path
    assert {r["fingerprint"]["options"]["inputs_key"] for r in first.values()} == {key_id(bytes.fromhex(key))}
    batch(root / "class", out)
    assert reports(out) == first  # nothing changed, no one regraded: same key, same bytes
    (out / ".grader" / KEY_FILE).write_text(key[:-2] + "\n")
    refused = batch_run(root / "class", out)
    said = [line for line in refused.stderr.splitlines() if KEY_FILE in line]
    assert refused.returncode == 2 and len(said) == 1 and said[0] == refused.stderr.splitlines()[-1], refused.stderr
    assert reports(out) == first


def test_a_gradescope_autograder_carries_its_own_key(tmp_path):
    from grader.authoring.gradescope import build

    keys = []
    for name in ("one", "two"):
        with zipfile.ZipFile(build(tmp_path / f"{name}.zip")) as archive:
            keys.append(read_key_text(archive.read(KEY_FILE).decode()))
    assert keys[0] != keys[1]
    script = (REPO / "grader" / "authoring" / "gradescope" / "run_autograder").read_text()
    assert "--inputs-key inputs.key" in script


def read_key_text(text: str) -> bytes:
    assert len(text.strip()) == 64
    return bytes.fromhex(text.strip())


def test_one_grading_takes_a_key_file_and_refuses_a_broken_one(tmp_path):
    submission = wrong_stage2(tmp_path / "ada")
    key = tmp_path / KEY_FILE
    read_key(key, make=True)
    _, keyed = grade(submission, "--stage", "2", "--inputs-key", str(key), report=tmp_path / "keyed.json")
    _, again = grade(submission, "--stage", "2", "--inputs-key", str(key), report=tmp_path / "again.json")
    _, unkeyed = grade(submission, "--stage", "2", report=tmp_path / "unkeyed.json")
    assert message(keyed, HIDDEN) == message(again, HIDDEN) != message(unkeyed, HIDDEN)
    key.write_text("0" * 10)
    refused = grade_run(submission, "--inputs-key", str(key))
    assert refused.returncode == 2 and KEY_FILE in refused.stderr
