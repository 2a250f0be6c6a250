"""The knowledge itself: workspaces and knowledge bases (catalog.py), the node tree's plain facts
(tree.py), reading nodes (nodes.py), changing them (edits.py), reviewing drafts (review.py), and the
views every surface returns (views.py)."""
