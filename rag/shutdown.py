"""Set once this process was told to stop (`rag serve` on SIGTERM or SIGINT, rag/api/app.py): the
work done for clients winds down at its next safe point instead of holding the shutdown. Event
streams end with a last event (rag/api/sse.py); an ingest a server runs for the local CLI stops
between files (rag/commands.py). Never set in a process that does not serve."""

from __future__ import annotations

import threading

STOPPING = threading.Event()
