"""Folders and documents (knowledge_base_mcp_server.md over HTTP): create, rename, move, delete,
summary, metadata, the published document, listings, the tree, roots and search by name.

Each endpoint is one service call with the caller's identity; the service checks the role, the
scopes and the folder access, answers out-of-scope items as not found, and records the call.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from rag.api.arguments import path_param, query_param
from rag.api.auth import Caller, Service
from rag.api.errors import ERROR_RESPONSES
from rag.api.node_schemas import MetadataBody, MoveBody, NameBody, NewDocument, NewFolder, SummaryBody
from rag.service.arguments import (
    DOCUMENT_ID,
    FOLDER_ID,
    GET_FOLDER_TREE,
    LIST_CHILDREN,
    MOVE_NODE,
    NODE_ID,
    SEARCH_NODES_BY_NAME,
)
from rag.service.content.views import CreatedDocument, Deleted, DocumentView, FolderTree, NamedNode, NodeInfo, View

router = APIRouter(prefix="/v1", tags=["folders and documents"], responses=ERROR_RESPONSES)

# Each route's operationId is its service operation, whose declarations (rag/service/arguments.py)
# its parameters and body are built from, as the MCP tool's input schema is.
DocumentId = path_param(DOCUMENT_ID)
FolderId = path_param(FOLDER_ID)
NodeId = path_param(NODE_ID)
MovedId = path_param(MOVE_NODE["node_id"])
ParentId = path_param(LIST_CHILDREN["parent_id"])
RootId = query_param(GET_FOLDER_TREE["root_id"])
NameQuery = query_param(SEARCH_NODES_BY_NAME["query"])
NamesLimit = query_param(SEARCH_NODES_BY_NAME["limit"])


def view_response(result: View | list[View]) -> JSONResponse:
    """The service's view as the MCP tools return it (`payload()`), so the surfaces cannot drift."""
    if isinstance(result, list):
        return JSONResponse([item.payload() for item in result])
    return JSONResponse(result.payload())


# ----- reading -----

@router.get("/roots", response_model=list[NodeInfo], operation_id="get_root_nodes",
            summary="Top-level nodes the token sees (get_root_nodes)")
def roots(svc: Service, principal: Caller) -> JSONResponse:
    """Each knowledge base's root folder under access all, the token's folders under folder access,
    nothing without access (this one never refuses)."""
    return view_response(svc.get_root_nodes(principal))


@router.get("/tree", response_model=FolderTree, response_model_exclude_none=True, operation_id="get_folder_tree",
            summary="The folder tree (get_folder_tree)")
def tree(svc: Service, principal: Caller, root_id: RootId = None) -> JSONResponse:
    """Names and structure only, from `root_id` or from every root the token sees; documents have no
    `children`. Cut breadth first at 10,000 nodes, with `truncated: true`."""
    return view_response(svc.get_folder_tree(principal, root_id))


@router.get("/nodes/search", response_model=list[NamedNode], operation_id="search_nodes_by_name",
            summary="Find nodes by name (search_nodes_by_name)")
def search_by_name(svc: Service, principal: Caller, query: NameQuery = None,
                   limit: NamesLimit = SEARCH_NODES_BY_NAME["limit"].default) -> JSONResponse:
    """Folders and documents whose name contains `query`, ignoring case; shortest names first."""
    return view_response(svc.search_nodes_by_name(principal, query, limit))


@router.get("/folders/{parent_id}/children", response_model=list[NodeInfo], operation_id="list_children",
            summary="A folder's contents (list_children)")
def children(parent_id: ParentId, svc: Service, principal: Caller) -> JSONResponse:
    """One level deep, folders first, then by name. Documents say which version is published and which is a draft."""
    return view_response(svc.list_children(principal, parent_id))


@router.get("/documents/{node_id}", response_model=DocumentView, operation_id="get_document",
            summary="The published document (get_document)")
def get_document(node_id: DocumentId, svc: Service, principal: Caller) -> JSONResponse:
    """The published version's body, summary and metadata. A document with only drafts is not found.
    Each read counts one citation."""
    return view_response(svc.get_document(principal, node_id))


# ----- writing -----

@router.post("/folders", response_model=NodeInfo, status_code=201, operation_id="create_folder",
             summary="Create a folder (create_folder)")
def create_folder(body: NewFolder, svc: Service, principal: Caller) -> JSONResponse:
    folder = svc.create_folder(principal, body.parent_id, body.name, body.summary, body.metadata)
    return JSONResponse(folder.payload(), status_code=201)


@router.post("/documents", response_model=CreatedDocument, status_code=201, operation_id="create_document",
             summary="Create a document as a draft (create_document)")
def create_document(body: NewDocument, svc: Service, principal: Caller) -> JSONResponse:
    """Version 1 is a draft: not searchable until published. Name, summary and metadata apply at once."""
    made = svc.create_document(principal, body.parent_id, body.name, body.content, body.summary, body.metadata)
    return JSONResponse(made.payload(), status_code=201)


@router.put("/folders/{node_id}/name", response_model=NodeInfo, operation_id="rename_folder",
            summary="Rename a folder (rename_folder)")
def rename_folder(node_id: FolderId, body: NameBody, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.rename_folder(principal, node_id, body.name))


@router.put("/documents/{node_id}/name", response_model=NodeInfo, operation_id="rename_document",
            summary="Rename a document (rename_document)")
def rename_document(node_id: DocumentId, body: NameBody, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.rename_document(principal, node_id, body.name))


@router.put("/nodes/{node_id}/summary", response_model=NodeInfo, operation_id="set_summary",
            summary="Set or clear a summary (set_summary)")
def set_summary(node_id: NodeId, body: SummaryBody, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.set_summary(principal, node_id, body.summary))


@router.put("/nodes/{node_id}/metadata", response_model=NodeInfo, operation_id="set_metadata",
            summary="Replace the metadata (set_metadata)")
def set_metadata(node_id: NodeId, body: MetadataBody, svc: Service, principal: Caller) -> JSONResponse:
    """A full replacement, not a merge: keys left out are removed."""
    return view_response(svc.set_metadata(principal, node_id, body.metadata))


@router.post("/nodes/{node_id}/move", response_model=NodeInfo, operation_id="move_node",
             summary="Move a folder or document (move_node)")
def move(node_id: MovedId, body: MoveBody, svc: Service, principal: Caller) -> JSONResponse:
    """Into another folder, with everything inside it; never into itself or below itself."""
    return view_response(svc.move_node(principal, node_id, body.parent_id))


@router.delete("/folders/{node_id}", response_model=Deleted, operation_id="delete_folder",
               summary="Delete a folder and everything in it")
def delete_folder(node_id: FolderId, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.delete_folder(principal, node_id))


@router.delete("/documents/{node_id}", response_model=Deleted, operation_id="delete_document",
               summary="Delete a document (delete_document)")
def delete_document(node_id: DocumentId, svc: Service, principal: Caller) -> JSONResponse:
    return view_response(svc.delete_document(principal, node_id))
