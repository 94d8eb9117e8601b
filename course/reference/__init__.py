"""Reference solutions, one module per chapter, generated from the cells
tagged ``export`` in solutions/<chapter>/<chapter>.ipynb by
``python -m autograder release``. Do not edit these files by hand.

When a chapter is graded, the sandbox holds only the modules of earlier
chapters, so an answer that imports its own chapter's reference gets nothing.
"""
