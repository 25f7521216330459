"""examples/notebook.ipynb, executed headless (nbclient) as a reader would run it: no cell
fails, the trace shows as the --html page in its own frame, the heatmap as a PNG, and the
numbers printed are the trace's. The executed notebook and its HTML output are left in
$ATTN_TRACE_ARTIFACTS (tests/python.sh: .cache/artifacts/, which CI uploads)."""

import html
import os
from pathlib import Path

import pytest

from conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def test_the_example_notebook_runs_and_shows_the_page():
    path = ROOT / "examples" / "notebook.ipynb"
    nb = nbformat.read(path, as_version=4)
    # The kernel is this interpreter (the venv that has attn_trace installed).
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = {i: c.get("outputs", []) for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    errors = [o for outs in outputs.values() for o in outs if o.output_type == "error"]
    assert not errors, errors
    data = [o.get("data", {}) for outs in outputs.values() for o in outs]
    frames = [d["text/html"] for d in data if "text/html" in d and "<iframe" in d["text/html"]]
    assert len(frames) == 2  # the trace, and the causal one beside it
    page = html.unescape(frames[0].split('srcdoc="', 1)[1].rsplit('"', 1)[0])
    assert page.startswith("<!DOCTYPE html>") and "Attention weights" in page
    assert "my shoes are small, my feet are big." in page
    assert any("image/png" in d for d in data), "the heatmap is not an image"
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for outs in outputs.values() for o in outs)
    assert "('head', 'query_pos', 'key_pos') (2, 8, 8)" in text
    assert "['[CLS]', 'the', 'cat'" in text
    assert "False layers.0.attn.scores" in text  # causal: the scores are the first to differ
    assert text.count("2 --heads: ") == 1
    # tests/python.sh names the folder (.cache/artifacts); a bare pytest run writes nothing.
    if os.environ.get("ATTN_TRACE_ARTIFACTS"):
        art = Path(os.environ["ATTN_TRACE_ARTIFACTS"])
        art.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, art / "notebook.ipynb")
        (art / "notebook-output.html").write_text(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>notebook output</title></head><body>\n"
            + "\n".join(frames)
            + "\n</body></html>\n"
        )
