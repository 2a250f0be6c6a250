"""The reading tools of knowledge_base_mcp_server.md. Each runs the service method of its own name
(ToolSpec.execute); nodes (folders and documents alike) are addressed by node id, and every call
goes through the caller's scope in the service, where anything outside it reads as "not found"."""

from __future__ import annotations

from rag.mcp.outputs import Children, DocumentHits, NamedNodes, RootNodes, Versions
from rag.mcp.spec import READ, Call, Hints, Output, ToolSpec
from rag.service.arguments import (
    GET_CURRENT_NODE,
    GET_DOCUMENT,
    GET_DOCUMENT_VERSION,
    GET_DOCUMENT_VERSIONS,
    GET_FOLDER_TREE,
    GET_ROOT_NODES,
    LIST_CHILDREN,
    SEARCH_DOCUMENTS,
    SEARCH_NODES_BY_NAME,
)
from rag.service.content.views import CurrentNode, DocumentView, FolderTree, VersionView


def _get_current_node(call: Call) -> Output:
    return Output.json(call.svc.get_current_node(call.principal, call.current_node).payload())


READ_TOOLS = (
    ToolSpec(
        "search_documents", "Search documents",
        "Search the knowledge base for content relevant to a question or topic. Combines semantic understanding "
        "(meaning-based) and keyword matching (full-text), so it finds relevant content even when the exact words "
        "are not used. Only published documents are returned - drafts are never surfaced in search. Each result's "
        "node_id is what get_document takes.",
        SEARCH_DOCUMENTS, DocumentHits, READ,
    ),
    ToolSpec(
        "get_document", "Get document",
        "Retrieve the full content of a specific document, including its complete Markdown body. Use this after "
        "search_documents to read the complete text of a result. Only published documents can be retrieved - an "
        "unpublished draft is reported as \"not found\". Each read records a citation on the document "
        "(citation_count), helping your team understand which documents agents rely on most.",
        GET_DOCUMENT, DocumentView,
        Hints(read_only=True, idempotent=False),  # each read adds a citation
    ),
    ToolSpec(
        "get_document_versions", "Get document versions",
        "Retrieve a document's whole version history, newest first, without the Markdown bodies. Unlike "
        "get_document, this is not limited to the published version - draft, publishing, published and archived "
        "versions are all listed, each with its version number, status and timestamps. Use it to find the "
        "version_number to pass to get_document_version or publish_document_version.",
        GET_DOCUMENT_VERSIONS, Versions, READ,
    ),
    ToolSpec(
        "get_document_version", "Get document version",
        "Retrieve one specific version of a document, including its Markdown body, addressed by its 1-based version "
        "number. Like get_document_versions, it is not limited to the published version - it can also return a "
        "draft, a version pending publication, or an archived one.",
        GET_DOCUMENT_VERSION, VersionView, READ,
    ),
    ToolSpec(
        "list_children", "List children",
        "List the immediate contents (documents and sub-folders) of a folder, one level deep. Use this to browse "
        "the knowledge base structure step by step. For the complete nested tree at once, use get_folder_tree "
        "instead.",
        LIST_CHILDREN, Children, READ,
    ),
    ToolSpec(
        "get_folder_tree", "Get folder tree",
        "Return the full folder structure as a nested tree, showing the hierarchy of all folders and documents the "
        "agent has access to. Returns names and structure only - no document bodies or metadata. Use get_document "
        "or list_children to read those. Without root_id, the tree starts at every root get_root_nodes returns.",
        GET_FOLDER_TREE, FolderTree, READ,
    ),
    ToolSpec(
        "search_nodes_by_name", "Search nodes by name",
        "Find documents and folders by their title or name, rather than by their content. Matches items whose name "
        "contains the query text (case-insensitive). Use search_documents to search what documents say; use this "
        "to find a document or folder you already know the name of.",
        SEARCH_NODES_BY_NAME, NamedNodes, READ,
    ),
    ToolSpec(
        "get_root_nodes", "Get root nodes",
        "Return the knowledge base's top-level nodes as this agent is scoped to see them - its own assigned folders "
        "under Selected folders scope, or the root folder of each of the organisation's knowledge bases (for example "
        "\"Assistant Documents\") under All scope. Returns an empty list if the agent has no access. Pass a returned "
        "id as root_id to get_folder_tree or parent_id to list_children to browse from there.",
        GET_ROOT_NODES, RootNodes, READ,
    ),
    ToolSpec(
        "get_current_node", "Get current node",
        "Return the id of the knowledge-base node the user is currently viewing, or null if there is none. This is "
        "conversation context, read from the request (the X-Current-Node header over HTTP, or current_node_id in the "
        "request's _meta); it never fails.",
        GET_CURRENT_NODE, CurrentNode, READ, _get_current_node,
    ),
)
