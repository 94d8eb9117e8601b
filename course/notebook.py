"""Helpers the chapter notebooks share: interactive explorers that keep
working in the static HTML book, and figures that use the reference solution
until the reader has solved the exercise they depend on."""

from __future__ import annotations

import importlib
import io
import os
from typing import Any, Callable, Sequence

import ipywidgets as widgets

from .protocol import PROBE_DIR_ENV


def implemented_or_reference(student_fn: Callable, reference: str, *probe_args: Any,
                             use: Callable[[Any], Any] | None = None) -> Callable:
    """Return `student_fn` if it runs on `probe_args` (and `use`, if given, runs on what that call
    returned: a module's forward pass, say), else the reference.

    `reference` names the reference object as ``"module.name"`` inside
    `course.reference`, e.g. ``"tokenizing.train_bpe"``. Figures call this so
    they appear in the book (where exercises are unsolved) and show the
    student's own work once it runs. When the reference cannot be imported
    (as while grading), the student's function is returned unchanged.
    """
    try:
        made = student_fn(*probe_args)
        if use is not None:
            use(made)
        return student_fn
    except Exception as err:
        module, _, name = reference.rpartition(".")
        try:
            ref = getattr(importlib.import_module(f"course.reference.{module}"), name)
        except ImportError:
            return student_fn
        reason = "not solved yet" if isinstance(err, NotImplementedError) else f"raised {type(err).__name__}"
        print(f"(Your {getattr(student_fn, '__name__', 'code')} is {reason}: this figure uses the reference solution.)")
        return ref


def _as_widget(item: Any) -> widgets.Widget:
    if isinstance(item, widgets.Widget):
        return item
    if isinstance(item, str):
        return widgets.HTML(item)
    if hasattr(item, "savefig"):  # a matplotlib figure
        import matplotlib.pyplot as plt

        buf = io.BytesIO()
        item.savefig(buf, format="png", dpi=80, bbox_inches="tight")
        plt.close(item)
        return widgets.Image(value=buf.getvalue(), format="png",
                             layout=widgets.Layout(max_width="100%", height="auto"))
    raise TypeError(f"cannot show a {type(item).__name__} in an explorer")


def explorer(render: Callable[..., Any], **params: Sequence[Any]) -> widgets.Widget:
    """An interactive figure that also works in the static HTML book.

    Every combination of `params` is rendered in advance (`render(**combo)`
    returns a matplotlib figure, an HTML string or a widget); one slider per
    parameter picks the combination. The sliders drive nested
    `ipywidgets.Stack`s through `jslink`, which runs in the browser, so the
    book needs no Python kernel for the explorer to respond.
    Keep the grid small: the number of frames is the product of the lengths.
    """
    if os.environ.get(PROBE_DIR_ENV):  # being graded: nobody will look, skip the rendering
        return widgets.HTML("(explorer not rendered while grading)")
    names = list(params)
    sliders = [widgets.SelectionSlider(options=[(str(v), v) for v in params[n]], description=n,
                                       continuous_update=True, style={"description_width": "initial"})
               for n in names]

    def level(depth: int, chosen: dict[str, Any]) -> widgets.Widget:
        if depth == len(names):
            return _as_widget(render(**chosen))
        children = [level(depth + 1, {**chosen, names[depth]: v}) for v in params[names[depth]]]
        stack = widgets.Stack(children, selected_index=0)
        widgets.jslink((sliders[depth], "index"), (stack, "selected_index"))
        return stack

    return widgets.VBox([widgets.HBox(sliders), level(0, {})])

