"""Questions put to the knowledge: ranked excerpts (search.py), a knowledge base's search as the MCP
tool returns it (kb_search.py), and cited answers (answers.py)."""
