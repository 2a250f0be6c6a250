"""The tools of knowledge_search_and_ask.txt (`search_knowledge`, `ask_knowledge`) and of
search_knowledge_base.txt (`search_knowledge_base`): each calls the service method the CLI and the
HTTP API call, and renders the result the way its own document says."""

from __future__ import annotations

from typing import Callable

from rag.mcp.outputs import AskKnowledgeOutput, SearchKnowledgeBaseOutput, SearchKnowledgeOutput
from rag.mcp.render import ask_knowledge_output, search_knowledge_output
from rag.mcp.spec import READ, Call, Output, ToolSpec
from rag.render import knowledge_base_search_payload
from rag.service.arguments import ASK, SEARCH, SEARCH_KNOWLEDGE_BASE, Operation

TOOL_FAILED = "Tool failed: "

# search_knowledge offers search's query and limit (the HTTP API adds `kb`); ask_knowledge, the query.
SEARCH_KNOWLEDGE = SEARCH.only("query", "limit")
ASK_KNOWLEDGE = ASK.only("query")


def _search_knowledge(call: Call) -> Output:
    limit = SEARCH["limit"].clamp(call.arg("limit"))  # the document's rule: clamped, never refused
    result = call.svc.search(call.principal, call.arg("query"), limit)
    return search_knowledge_output(result.query, result.hits, call.svc.settings.retrieve.excerpt_chars)


def _ask_knowledge(call: Call) -> Output:
    answer = call.svc.ask(call.principal, call.arg("query"))
    return ask_knowledge_output(answer, call.svc.settings.retrieve.excerpt_chars)


def _search_knowledge_base(call: Call) -> Output:
    result = call.svc.search_knowledge_base(
        call.principal, call.arg("query"), call.arg("workspace_id"), call.arg("kb_id"), call.arg("top_k")
    )
    return Output.json(knowledge_base_search_payload(result, call.svc.settings.retrieve.excerpt_chars))


def _query_tool(
    name: str, title: str, description: str, operation: Operation, output_type: object,
    run: Callable[[Call], Output], error_prefix: str = TOOL_FAILED,
) -> ToolSpec:
    """A read-only tool whose one required argument is `query`."""
    return ToolSpec(name, title, description, operation, output_type, READ, run, error_prefix)


KNOWLEDGE_TOOLS = (
    _query_tool(
        "search_knowledge_base", "Search knowledge bases",
        "Semantic search over the workspace's knowledge bases. Role required: viewer. With no kb_id it searches "
        "every knowledge base of the workspace, merges the results, sorts them by score and returns the best top_k "
        "overall; with a kb_id, that one only. A workspace without a knowledge base gives an empty list and a note. "
        "A knowledge base that answers with an error is skipped, logged and named in failed_knowledge_bases.",
        SEARCH_KNOWLEDGE_BASE, SearchKnowledgeBaseOutput, _search_knowledge_base,
        error_prefix="",  # its document has no prefix
    ),
    _query_tool(
        "search_knowledge", "Search knowledge",
        "Hybrid (vector + full-text) search over the organization's ingested knowledge base. Returns ranked "
        "document excerpts with relevance scores. Use for finding source material to reason over yourself.\n\n"
        "Use this when you want raw passages to reason over. For a direct answer, use ask_knowledge. "
        "The document_id/source_id of a result is a knowledge id, not a node id: never pass it to the document "
        "tools (get_document takes the node ids of search_documents).",
        SEARCH_KNOWLEDGE, SearchKnowledgeOutput, _search_knowledge,
    ),
    _query_tool(
        "ask_knowledge", "Ask knowledge",
        "Ask a question about the organization's knowledge base and get an LLM-synthesized answer with cited "
        "sources. Use when you want a direct answer rather than raw excerpts. The answer is a synthesis: follow "
        "the cited sources for detail.",
        ASK_KNOWLEDGE, AskKnowledgeOutput, _ask_knowledge,
    ),
)
