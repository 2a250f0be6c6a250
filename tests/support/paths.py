"""Where the tests find the repository and the shared datasets (no rag import: every tier uses it)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("RAG_SHARED_DIR", REPO.parent / "shared"))
HANDBOOK = SHARED / "datasets" / "handbook_18f" / "pages"

SMALL_SET = [
    "travel-and-leave/leave.md",
    "travel-and-leave/travel-and-leave-policies/travel-guide-faq.md",
    "tools/slack/getting-started.md",
    "tools/teams.md",
    "general-information-and-resources/collaboration-tools.md",
]
