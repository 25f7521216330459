"""Notebook views of a Trace: the ``--html`` page inline, and one head as a matplotlib figure."""

from __future__ import annotations

import html
import itertools

_counter = itertools.count()


def inline(page: str) -> str:
    """The page in an iframe of its own: its element ids, styles and script stay inside, so
    two traces in one notebook (or the notebook's own page) do not clash."""
    n = next(_counter)
    # The frame grows to its page once loaded (srcdoc frames share the notebook's origin).
    grow = "this.style.height=(this.contentWindow.document.documentElement.scrollHeight+20)+'px'"
    return (
        f'<iframe class="attn-trace" id="attn-trace-{n}" title="attn-trace" '
        f'style="width:100%;height:600px;border:1px solid #ddd;resize:vertical" '
        f'onload="{grow}" srcdoc="{html.escape(page, quote=True)}"></iframe>'
    )


def heatmap(trace, layer: int, head: int):
    """A matplotlib figure of one head's attention weights, rows queries, columns keys."""
    try:
        import matplotlib.figure
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("Trace.heatmap needs matplotlib: pip install matplotlib") from e
    import numbers

    from . import ArgumentError, Error
    from ._args import what

    for name, n in (("layer", layer), ("head", head)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise ArgumentError(f"heatmap: {name} is {what(n)}, not a whole number (pass e.g. {name}=0)", 2)
    sid = f"layers.{layer}.attn.weights"
    if sid not in trace.steps:
        raise Error(
            f"heatmap: the trace has no step {sid} (trace with steps that include weights, and a layer in range)", 2
        )
    heads = trace.heads(sid)
    if head not in heads:
        raise Error(f"heatmap: head {head} is not in the trace (it holds heads {heads})", 2)
    w = trace.steps[sid][heads.index(head)]
    labels = trace.labels  # the tokens as text (·café), as the command's heatmap shows them
    fig = matplotlib.figure.Figure(figsize=(1 + 0.45 * len(labels), 0.6 + 0.45 * len(labels)))
    ax = fig.add_subplot()
    im = ax.imshow(w, cmap="viridis", vmin=0.0)
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"layer {layer}, head {head}: attention weights")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig
