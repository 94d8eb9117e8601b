"""The learner's own model (course.learner): a learner's notebooks collected into a package, each
piece theirs where it passes its chapter's visible checks and the reference otherwise.

The learners are made from the solution notebooks, with one chapter left as the released stub, one
answer wrong and one chapter whose answers do not even import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.chapters import ROOT
from course.learner import collect, learner_parts
from course.models import Seq2SeqConfig, Seq2SeqModel
from course.parts import PIECES
from course.reference.add_norm import LayerNorm as ReferenceLayerNorm
from course.reference.multi_head_attention import MultiHeadAttention as ReferenceMHA

DEMO = "import numpy as np\nraise RuntimeError('a demonstration cell ran')"
WRONG_PE = ("return x + self.pe[:seq_len]", "return x + self.pe[1:seq_len + 1]")  # off by one position
WRONG_MHA = ("return self.W_o(merge_heads(heads)), weights", "return merge_heads(heads), weights")  # no W_o
BROKEN_LN = ("from collections.abc import Callable", "from collections.abc import Callable\nEPS = eps_default")


def write_notebook(folder: Path, chapter: str, stub: bool = False,
                   edits: dict[str, tuple[str, str]] | None = None, demo: bool = False) -> None:
    """A learner's notebook: the solution (or the released stub), answer cells edited by grade id;
    with `demo`, a demonstration cell that raises and an answer that needs its `np` import."""
    nb = nbformat.read(ROOT / ("chapters" if stub else "solutions") / chapter / f"{chapter}.ipynb", as_version=4)
    for cell in nb.cells:
        old, new = (edits or {}).get(cell.metadata.get("nbgrader", {}).get("grade_id"), ("", ""))
        if old:
            assert cell.source.count(old) == 1, old
            cell.source = cell.source.replace(old, new)
    if demo:
        answer = next(cell for cell in nb.cells if "export" in cell.metadata.get("tags", []))
        answer.source += "\n\n\ndef circle_area(r: float) -> float:\n    return np.pi * r ** 2\n"
        nb.cells.append(nbformat.v4.new_code_cell(DEMO))
    nbformat.write(nb, folder / f"{chapter}.ipynb")


#: one worker runs this module, so its module fixture is made once (`make test` runs two)
pytestmark = pytest.mark.xdist_group("learner")


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    """Chapters 2, 3 (a wrong PositionalEncoding), 5, 6 (the stub), 7 and 8; none of 4, 9, 10 and 11."""
    root = tmp_path_factory.mktemp("learner")
    notebooks = root / "chapters"
    notebooks.mkdir()
    write_notebook(notebooks, "02_embedding", demo=True)
    write_notebook(notebooks, "03_positional_encoding", edits={"positional-encoding": WRONG_PE})
    for chapter in ("05_multi_head_attention", "07_feed_forward", "08_decoder"):
        write_notebook(notebooks, chapter)
    write_notebook(notebooks, "06_add_norm", stub=True)
    report = collect(notebooks, root / "my_transformer")
    return report, learner_parts(root / "my_transformer")


def test_each_piece_is_yours_where_it_passes_else_the_reference_with_why(learner):
    report, parts = learner
    assert report.missing == ["attention", "decoding", "training", "modern"]
    expected = {"PositionalEncoding": "fails check positional_encoding.positional_encoding",
                "LayerNorm": "not implemented"}
    for piece, topic in PIECES.items():
        if topic in report.missing:
            expected[piece] = "notebook not found"
    assert parts.reasons == expected
    for piece in PIECES:
        assert parts.owner(piece) == ("reference" if piece in expected else "yours"), piece
        if piece in expected:
            assert getattr(parts, piece).__module__ == f"course.reference.{PIECES[piece]}", piece
    assert set(parts.objects) == set(PIECES)
    table = parts.table()
    assert "fails check positional_encoding.positional_encoding" in table and "9 of 29 pieces are yours" in table


def test_reference_imports_point_at_the_learners_own_modules(learner):
    report, parts = learner
    source = (report.out / "feed_forward.py").read_text()
    assert "from .add_norm import LayerNorm, pre_ln_residual" in source
    assert "from .multi_head_attention import MultiHeadAttention" in source
    assert "from course.reference.attention import" in (report.out / "multi_head_attention.py").read_text()
    layer = parts.EncoderLayer(16, 2, 32)
    attention = next(m for m in layer.modules() if "MultiHeadAttention" in type(m).__name__)
    assert type(attention).__module__ == f"{parts.package}.multi_head_attention"  # theirs: it passes
    norms = [m for m in layer.modules() if "LayerNorm" in type(m).__name__]
    assert norms and all(type(m) is ReferenceLayerNorm for m in norms)  # their stub: the reference's


def test_only_answer_cells_and_the_imports_they_need_are_collected(learner):
    report, _ = learner
    source = (report.out / "embedding.py").read_text()
    assert "a demonstration cell ran" not in source
    assert "import numpy as np" in source  # the answer's circle_area needs it
    assert sys.modules[f"{learner[1].package}.embedding"].circle_area(1.0) == pytest.approx(3.14159, abs=1e-5)


def test_a_model_of_the_learners_parts_runs(learner):
    _, parts = learner
    model = Seq2SeqModel(Seq2SeqConfig(src_vocab=11, tgt_vocab=13, d_model=16, num_heads=2, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=32), parts=parts)
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))
    src[0, -1] = 0  # padding
    assert model(src, tgt).shape == (2, 4, 13)
    assert type(model.transformer).__module__ == f"{parts.package}.decoder"


def test_the_learners_pieces_work_with_the_reference_where_their_dependency_fails(tmp_path):
    notebooks = tmp_path / "chapters"
    notebooks.mkdir()
    write_notebook(notebooks, "05_multi_head_attention", edits={"multi-head-attention": WRONG_MHA})
    write_notebook(notebooks, "06_add_norm", edits={"layer-norm": BROKEN_LN})
    for chapter in ("07_feed_forward", "08_decoder"):
        write_notebook(notebooks, chapter)
    collect(notebooks, tmp_path / "mine")
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    parts = learner_parts(tmp_path / "mine")
    assert torch.equal(torch.rand(3), expected), "learner_parts changed torch's random state"
    assert parts.reasons["MultiHeadAttention"].startswith("fails check multi_head_attention.")
    assert parts.reasons["LayerNorm"] == ("your chapter's answers do not run: NameError: "
                                          "name 'eps_default' is not defined")
    assert all(parts.owner(p) == "yours" for p in ("EncoderLayer", "Encoder", "DecoderLayer", "Transformer"))
    layer = parts.EncoderLayer(16, 2, 32)
    assert type(layer).__module__ == "mine.feed_forward"
    assert {type(m) for m in layer.modules()} >= {ReferenceMHA, ReferenceLayerNorm}
    model = Seq2SeqModel(Seq2SeqConfig(src_vocab=7, tgt_vocab=7, d_model=16, num_heads=2, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=32), parts=parts)
    assert model(torch.randint(1, 7, (2, 5)), torch.randint(1, 7, (2, 3))).shape == (2, 3, 7)


def test_collect_refuses_a_folder_it_did_not_write(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        collect(ROOT / "chapters" / "02_embedding", tmp_path / "notes")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "mine"
    with pytest.raises(FileNotFoundError):
        collect(tmp_path / "nowhere", tmp_path / "out")


def test_the_command_collects_and_prints_whose_each_piece_is(tmp_path):
    notebooks = tmp_path / "work"
    notebooks.mkdir()
    write_notebook(notebooks, "02_embedding")
    proc = subprocess.run([sys.executable, "-m", "course.learner", "collect", str(notebooks), "--out", "pkg"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pkg" / "embedding.py").is_file()
    lines = {line.split()[0]: line.split()[2] for line in proc.stdout.splitlines()
             if line.split() and line.split()[0] in PIECES}
    assert lines["Embedding"] == "yours" and lines["Transformer"] == "reference"
    assert "1 of 29 pieces are yours" in proc.stdout
    assert collect(notebooks, tmp_path / "pkg").notebooks == {"embedding": notebooks / "02_embedding.ipynb"}  # again


def test_a_learners_modern_model_trains_with_their_own_pieces(tmp_path):
    """Chapter 11's model from a learner's notebooks: their ModernLM and their AdamW train it."""
    from dataclasses import replace

    from course.data import CharCorpus
    from course.modern_lm import TRAIN, train_yours

    notebooks = tmp_path / "chapters"
    notebooks.mkdir()
    for chapter in ("10_training", "11_modern"):
        write_notebook(notebooks, chapter)
    collect(notebooks, tmp_path / "mine")
    parts = learner_parts(tmp_path / "mine")
    assert {parts.owner(name) for name in ("ModernLM", "AdamW", "decay_groups", "train_step")} == {"yours"}
    made = []
    corpus = CharCorpus("Now is the winter of our discontent\nMade glorious summer by this sun of York;\n" * 40)
    model, history = train_yours(corpus, parts, replace(TRAIN, steps=3, warmup_steps=1, eval_every=3, eval_batches=2),
                                 callback=lambda done, h: made.append(done))
    assert type(model) is parts.ModernLM and type(model).__module__.startswith("mine")
    assert made == [1, 2, 3] and history.steps == 3 and len(history.val) == 1
    assert all(torch.isfinite(torch.tensor(history.train_loss)))
    assert history.train_loss[-1] < history.train_loss[0], "three steps at the peak rate lower the loss"


BEFORE_CHAPTER_11_IS_DUE = """
import sys
from dataclasses import replace
sys.modules["course.reference.modern"] = None  # a student edition before chapter 11 is due holds no such module
from course.data import CharCorpus
from course.learner import learner_parts
from course.modern_lm import TRAIN, VARIANTS, train_yours
parts = learner_parts(sys.argv[1])
assert VARIANTS == {} and parts.owner("ModernLM") == "yours", (VARIANTS, parts.reasons)
corpus = CharCorpus("Now is the winter of our discontent\\nMade glorious summer by this sun of York;\\n" * 40)
model, history = train_yours(corpus, parts, replace(TRAIN, steps=2, warmup_steps=1, eval_every=2, eval_batches=1))
print(type(model).__module__, history.steps)
"""


def test_a_learners_modern_model_trains_before_chapter_11_is_published(tmp_path):
    """The student edition holds chapter 11's answers only once it is due: train_yours runs on the
    learner's own pieces without them (course.modern_lm imported chapter 11's reference first)."""
    notebooks = tmp_path / "chapters"
    notebooks.mkdir()
    for chapter in ("10_training", "11_modern"):
        write_notebook(notebooks, chapter)
    collect(notebooks, tmp_path / "mine")
    proc = subprocess.run([sys.executable, "-c", BEFORE_CHAPTER_11_IS_DUE, str(tmp_path / "mine")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    module, steps = proc.stdout.split()
    assert module.startswith("mine") and steps == "2", proc.stdout
