"""The writing tools of knowledge_base_mcp_server.md: drafts and publishing, folders, names,
summaries, metadata, moves and deletes. Each runs the service method of its own name
(ToolSpec.execute). There is deliberately no rollback tool: rolling back to an earlier version is
for people, never agents."""

from __future__ import annotations

from rag.mcp.spec import Hints, ToolSpec
from rag.service.arguments import (
    CREATE_DOCUMENT,
    CREATE_FOLDER,
    DELETE_DOCUMENT,
    DELETE_FOLDER,
    MOVE_NODE,
    PUBLISH_DOCUMENT_VERSION,
    RENAME_DOCUMENT,
    RENAME_FOLDER,
    SET_METADATA,
    SET_SUMMARY,
    UPDATE_DOCUMENT,
)
from rag.service.content.views import CreatedDocument, Deleted, NodeInfo, VersionInfo

ADD = Hints(read_only=False, idempotent=False)  # a second call makes nothing new: the name is taken
CHANGE = Hints(read_only=False)  # the same call again changes nothing more
OVERWRITE = Hints(read_only=False, destructive=True)  # replaces or removes what was there

WRITE_TOOLS = (
    ToolSpec(
        "create_document", "Create document",
        "Create a new document with Markdown content. The content is saved as a draft - it will not appear in "
        "search or be readable by get_document until published (via publish_document_version, with version_number "
        "1). The document's name, summary, and metadata take effect immediately.",
        CREATE_DOCUMENT, CreatedDocument, ADD,
    ),
    ToolSpec(
        "update_document", "Update document",
        "Replace the entire Markdown body of an existing document. The edit is saved as a draft - the currently "
        "published content stays live and searchable until the new version is published (via "
        "publish_document_version). Every edit is kept as a new draft version, numbered after the newest; "
        "concurrent edits become consecutive versions. Returns the new draft version.",
        UPDATE_DOCUMENT, VersionInfo, OVERWRITE,
    ),
    ToolSpec(
        "publish_document_version", "Publish document version",
        "Publish a specific version of a document, identified by its version_number (from get_document_versions), "
        "making it live and searchable. Returns at once with the version's status: publishing until its text is "
        "indexed, then published (poll get_document_versions). Only draft versions can be published: calling it "
        "again on a version that is already publishing or published is a no-op that returns the version unchanged, "
        "while publishing an archived version fails. Rollback to a previous version is not available to agents.",
        PUBLISH_DOCUMENT_VERSION, VersionInfo, CHANGE,
    ),
    ToolSpec(
        "rename_document", "Rename document",
        "Change the title of an existing document without touching its body. Applies immediately - no draft or "
        "publish step.",
        RENAME_DOCUMENT, NodeInfo, CHANGE,
    ),
    ToolSpec(
        "delete_document", "Delete document",
        "Permanently delete a document, with every version.",
        DELETE_DOCUMENT, Deleted, OVERWRITE,
    ),
    ToolSpec(
        "create_folder", "Create folder",
        "Create a new folder to organise documents and sub-folders. Takes effect immediately - there is no draft "
        "step for folders.",
        CREATE_FOLDER, NodeInfo, ADD,
    ),
    ToolSpec(
        "rename_folder", "Rename folder",
        "Change the name of an existing folder. Applies immediately.",
        RENAME_FOLDER, NodeInfo, CHANGE,
    ),
    ToolSpec(
        "delete_folder", "Delete folder",
        "Delete a folder and everything inside it - all sub-folders and documents are removed as well. This action "
        "cannot be undone.",
        DELETE_FOLDER, Deleted, OVERWRITE,
    ),
    ToolSpec(
        "move_node", "Move node",
        "Move a document or folder to a different location in the hierarchy. Moving a folder also moves everything "
        "inside it. Branch-scoped agents can only move items within their assigned branch.",
        MOVE_NODE, NodeInfo, CHANGE,
    ),
    ToolSpec(
        "set_summary", "Set summary",
        "Set or clear the short summary on a document or folder. Applies immediately - summaries are descriptive "
        "text for people browsing the knowledge base and are not embedded or made searchable.",
        SET_SUMMARY, NodeInfo, OVERWRITE,
    ),
    ToolSpec(
        "set_metadata", "Set metadata",
        "Replace the metadata object on a document or folder. Applies immediately. This is a full replacement, not "
        "a merge - any key you omit will be permanently removed. To change a single key, first read the current "
        "metadata, apply your change, then send the complete updated object. Pass null to remove all metadata.",
        SET_METADATA, NodeInfo, OVERWRITE,
    ),
)
