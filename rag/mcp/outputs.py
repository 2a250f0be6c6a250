"""The structured outputs of the tools, as types: their JSON schemas are the tools' output schemas.

The first group is knowledge_search_and_ask.txt's and search_knowledge_base.txt's documented
shapes, field for field (a field the connector never recorded is absent, hence NotRequired). The
second wraps the node views (rag/service/content/views.py) that come back as lists under one key each,
because structured content must be a JSON object.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from typing_extensions import NotRequired, TypedDict

from rag.service.content.views import DocumentHit, NamedNode, NodeInfo, VersionInfo

SourceId = Annotated[str, Field(description=(
    "The knowledge base's id for the ingested source (provider:org:resource:item). Not an artifact id: "
    "never pass it to the document tools."
))]
Page = Annotated[int, Field(ge=1, description=(
    "The 1-based physical page of a PDF that the excerpt lies on (the page's index in the file, not the number "
    "printed on it). Absent for every source that is not a PDF."
))]
Slide = Annotated[int, Field(ge=1, description="For a PowerPoint deck: the 1-based slide the excerpt lies on.")]
Sheet = Annotated[str, Field(description="For a spreadsheet or CSV file: the name of the sheet the excerpt lies on.")]
Rows = Annotated[list[int], Field(min_length=2, max_length=2, description=(
    "For a spreadsheet: the first and last row (the sheet's own row numbers) of the records the excerpt covers."))]
Ocr = Annotated[bool, Field(description="true when the excerpt's page was read by OCR (a scan or an image).")]
DocumentId = Annotated[str, Field(description="The same value as source_id, kept for callers that already read it. "
                                              "Prefer source_id.")]
Score = Annotated[float, Field(description="The fused ranking score across the retrieval lanes.")]
Label = Annotated[str, Field(description=(
    "Where the source came from, in the connector's words (for example notion:Getting Started). A label, "
    "not a URL; absent when the connector recorded none."
))]


Url = Annotated[str, Field(description=(
    "Where the original lives (the page of a website, the file in its repository, the object in its bucket), for a "
    "document a source brought. Absent for every other document."
))]


class KnowledgeHit(TypedDict):
    source_id: SourceId
    document_id: DocumentId
    title: str
    score: Score
    retrievers: Annotated[list[str], Field(
        description='Which lanes found the excerpt (for example ["vector", "text"]).')]
    excerpt: Annotated[str, Field(description="The excerpt, up to 2,000 characters, then […truncated].")]
    source: NotRequired[Label]
    page: NotRequired[Page]
    slide: NotRequired[Slide]
    sheet: NotRequired[Sheet]
    rows: NotRequired[Rows]
    ocr: NotRequired[Ocr]
    url: NotRequired[Url]


class SearchKnowledgeOutput(TypedDict):
    results: Annotated[list[KnowledgeHit], Field(description="Ranked hits, best first.")]
    truncated: Annotated[bool, Field(description="true when results were dropped to keep the response under "
                                                 "50,000 characters.")]


class KnowledgeSource(TypedDict):
    source_id: SourceId
    document_id: DocumentId
    title: str
    score: Score
    source: NotRequired[Label]
    page: NotRequired[Annotated[int, Field(ge=1, description=(
        "For a PDF: the 1-based physical page of the first excerpt the answer cites from it. Absent otherwise."
    ))]]
    slide: NotRequired[Slide]
    sheet: NotRequired[Sheet]
    rows: NotRequired[Rows]
    ocr: NotRequired[Ocr]
    url: NotRequired[Url]


class AskKnowledgeOutput(TypedDict):
    answer: Annotated[str, Field(description="The synthesized answer, citing sources as [n].")]
    sources: Annotated[list[KnowledgeSource], Field(description=(
        "The sources the answer drew on, in citation order. Empty when the knowledge base had nothing relevant."
    ))]
    declined: NotRequired[Annotated[str, Field(description=(
        "Present when the answer declines: why, by name (off_topic, no_sentences, no_sentence_answers, "
        "subject_not_covered, other_period, model_declined)."
    ))]]


class KnowledgeBaseHit(KnowledgeHit):
    node_id: Annotated[str, Field(description="The document's node id, for get_document.")]
    kb_id: Annotated[str, Field(description="The knowledge base the excerpt came from.")]


class FailedKnowledgeBase(TypedDict):
    id: str
    name: str


class SearchKnowledgeBaseOutput(TypedDict):
    query: Annotated[str, Field(description="The text you searched for.")]
    results: Annotated[list[KnowledgeBaseHit], Field(description="The merged, score-sorted list, cut to top_k.")]
    note: NotRequired[Annotated[str, Field(description="Only when the workspace has no knowledge base.")]]
    failed_knowledge_bases: NotRequired[Annotated[list[FailedKnowledgeBase], Field(description=(
        "Each knowledge base that answered with an error and was skipped; present only when one did, so an empty "
        "result tells 'nothing matched' from 'every knowledge base refused'."
    ))]]


class DocumentHits(TypedDict):
    results: list[DocumentHit]


class Versions(TypedDict):
    versions: Annotated[list[VersionInfo], Field(description="Newest first, without bodies.")]


class Children(TypedDict):
    children: Annotated[list[NodeInfo], Field(description="Folders first, then by name.")]


class NamedNodes(TypedDict):
    results: Annotated[list[NamedNode], Field(description="Shortest names first.")]


class RootNodes(TypedDict):
    roots: list[NodeInfo]
