"""The writing tools of knowledge_base_mcp_server.md: drafts and publishing, folders, names,
summaries, metadata, moves and deletes. Each runs the service method of its own name
(ToolSpec.execute). There is deliberately no rollback tool: rolling back to an earlier version is
for people, never agents."""

from __future__ import annotations

from rag.mcp.schemas import DOCUMENT_ID, FOLDER_ID, inputs, integer, node_id, nullable, string
from rag.mcp.spec import Hints, ToolSpec
from rag.service.checks import MAX_CONTENT_CHARS, MAX_METADATA_CHARS, MAX_NAME_CHARS, MAX_SUMMARY_CHARS
from rag.service.views import CreatedDocument, Deleted, NodeInfo, VersionInfo

ADD = Hints(read_only=False, idempotent=False)  # a second call makes nothing new: the name is taken
CHANGE = Hints(read_only=False)  # the same call again changes nothing more
OVERWRITE = Hints(read_only=False, destructive=True)  # replaces or removes what was there

NAME = string("The name (a title for a document).", minLength=1, maxLength=MAX_NAME_CHARS)
CONTENT = string("The whole Markdown body.", maxLength=MAX_CONTENT_CHARS)
SUMMARY = nullable(string("A short summary for people browsing; null or blank clears it. Never searchable.",
                          maxLength=MAX_SUMMARY_CHARS))
METADATA = {
    "type": ["object", "null"],
    "description": f"Free-form key-value pairs (a JSON object of at most {MAX_METADATA_CHARS} characters), stored "
                   "as given; null removes it all.",
}
NEW_PARENT = node_id("The folder to create it in. Without it, an agent's node lands in the knowledge base "
                     "'Assistant Documents' (made on first use); a folder-scoped token must give one.")

WRITE_TOOLS = (
    ToolSpec(
        "create_document", "Create document",
        "Create a new document with Markdown content. The content is saved as a draft - it will not appear in "
        "search or be readable by get_document until published (via publish_document_version, with version_number "
        "1). The document's name, summary, and metadata take effect immediately.",
        inputs({"parent_id": NEW_PARENT, "name": NAME, "content": CONTENT, "summary": SUMMARY, "metadata": METADATA},
               required=("name", "content")),
        CreatedDocument, ADD,
    ),
    ToolSpec(
        "update_document", "Update document",
        "Replace the entire Markdown body of an existing document. The edit is saved as a draft - the currently "
        "published content stays live and searchable until the new version is published (via "
        "publish_document_version). Every edit is kept as a new draft version, numbered after the newest; "
        "concurrent edits become consecutive versions. Returns the new draft version.",
        inputs({"node_id": DOCUMENT_ID, "content": CONTENT}, required=("node_id", "content")),
        VersionInfo, OVERWRITE,
    ),
    ToolSpec(
        "publish_document_version", "Publish document version",
        "Publish a specific version of a document, identified by its version_number (from get_document_versions), "
        "making it live and searchable. Returns at once with the version's status: publishing until its text is "
        "indexed, then published (poll get_document_versions). Only draft versions can be published: calling it "
        "again on a version that is already publishing or published is a no-op that returns the version unchanged, "
        "while publishing an archived version fails. Rollback to a previous version is not available to agents.",
        inputs({"node_id": DOCUMENT_ID, "version_number": integer("The 1-based version number to publish.", minimum=1)},
               required=("node_id", "version_number")),
        VersionInfo, CHANGE,
    ),
    ToolSpec(
        "rename_document", "Rename document",
        "Change the title of an existing document without touching its body. Applies immediately - no draft or "
        "publish step.",
        inputs({"node_id": DOCUMENT_ID, "name": NAME}, required=("node_id", "name")),
        NodeInfo, CHANGE,
    ),
    ToolSpec(
        "delete_document", "Delete document",
        "Permanently delete a document, with every version.",
        inputs({"node_id": DOCUMENT_ID}, required=("node_id",)),
        Deleted, OVERWRITE,
    ),
    ToolSpec(
        "create_folder", "Create folder",
        "Create a new folder to organise documents and sub-folders. Takes effect immediately - there is no draft "
        "step for folders.",
        inputs({"parent_id": NEW_PARENT, "name": NAME, "summary": SUMMARY, "metadata": METADATA}, required=("name",)),
        NodeInfo, ADD,
    ),
    ToolSpec(
        "rename_folder", "Rename folder",
        "Change the name of an existing folder. Applies immediately.",
        inputs({"node_id": FOLDER_ID, "name": NAME}, required=("node_id", "name")),
        NodeInfo, CHANGE,
    ),
    ToolSpec(
        "delete_folder", "Delete folder",
        "Delete a folder and everything inside it - all sub-folders and documents are removed as well. This action "
        "cannot be undone.",
        inputs({"node_id": FOLDER_ID}, required=("node_id",)),
        Deleted, OVERWRITE,
    ),
    ToolSpec(
        "move_node", "Move node",
        "Move a document or folder to a different location in the hierarchy. Moving a folder also moves everything "
        "inside it. Branch-scoped agents can only move items within their assigned branch.",
        inputs({"node_id": node_id("The document or folder to move."),
                "parent_id": node_id("The folder to move it into.")}, required=("node_id", "parent_id")),
        NodeInfo, CHANGE,
    ),
    ToolSpec(
        "set_summary", "Set summary",
        "Set or clear the short summary on a document or folder. Applies immediately - summaries are descriptive "
        "text for people browsing the knowledge base and are not embedded or made searchable.",
        inputs({"node_id": node_id(), "summary": SUMMARY}, required=("node_id", "summary")),
        NodeInfo, OVERWRITE, present=("summary",),
    ),
    ToolSpec(
        "set_metadata", "Set metadata",
        "Replace the metadata object on a document or folder. Applies immediately. This is a full replacement, not "
        "a merge - any key you omit will be permanently removed. To change a single key, first read the current "
        "metadata, apply your change, then send the complete updated object. Pass null to remove all metadata.",
        inputs({"node_id": node_id(), "metadata": METADATA}, required=("node_id", "metadata")),
        NodeInfo, OVERWRITE, present=("metadata",),
    ),
)
