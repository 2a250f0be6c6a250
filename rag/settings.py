"""The one place that reads configuration: environment variables with the prefix ``RAG_``, the
``_FILE`` form of each secret, and an optional TOML file (``RAG_CONFIG``), in that order of priority.

Flat names for what a deployment sets (``RAG_HOME``, ``RAG_DATABASE_URL``, ``RAG_CHROMA_URL``,
``RAG_LLM_MODEL``, ``RAG_EMBED_MODEL``); nested models for tuning, set with a double underscore
(``RAG_INDEX__CHUNK_SIZE=300``, ``RAG_RETRIEVE__WEIGHTS__TEXT=1.0``). The TOML file uses the same
names, a table for each nested model (``[index]`` then ``chunk_size = 300``); rag/config_file.py reads
it and the secrets' files.
"""

from __future__ import annotations

import difflib
import os
import types
from functools import cached_property
from pathlib import Path
import json
from typing import Annotated, Any, Iterator, Literal, Union, get_args, get_origin

import platformdirs
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from rag.config_file import ConfigError, config_path, file_variable, read_config, read_secret_file
from rag.store.lock import default_home

LOCAL_EMBED_MODEL = "local:all-MiniLM-L6-v2"


class IndexSettings(BaseModel):
    """How documents become chunks and vectors."""

    chunk_size: int = Field(256, ge=32, le=8192, description="Target chunk size in tokens.")
    chunk_overlap: int = Field(32, ge=0, le=1024, description="Token overlap between chunks of one section.")
    embed_batch_size: int = Field(64, ge=1, le=4096)
    contextual_headings: bool = Field(
        True, description="Prefix each chunk's indexed text with its heading path (the excerpt is unchanged)."
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> "IndexSettings":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("index.chunk_overlap must be smaller than index.chunk_size")
        return self


class EmbedSettings(BaseModel):
    """How the packaged local model runs (rag/models/embed.py, rag/models/onnx_encoder.py)."""

    backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description="The local model's runtime for interactive calls (queries, an answer's sentences): ONNX Runtime "
        "(the files exported at install; no torch at query time) or sentence-transformers on torch (then for "
        "everything). Their fp32 vectors agree (cosine >= 0.99999), so they share the embedding cache and the "
        "vector index.",
    )
    bulk_backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description="With the onnx backend, the runtime of background document embedding (publishing, repairs): "
        "ONNX Runtime runs texts one per call, `threads` calls side by side (less CPU per text than torch's "
        "batches), and can pool the answers' sentence vectors out of each chunk's pass (sentence_vectors); torch "
        "is sentence-transformers. Interactive calls (queries, an answer's sentences) use the backend.",
    )
    sentence_vectors: Literal["alone", "pooled"] = Field(
        "pooled",
        description="How a publish makes the extractive answer's sentence vectors: on the onnx bulk runtime pooled "
        "out of its chunk's own pass (one pass per chunk, about 0.6x the CPU of a publish), an answer then embedding "
        "its best 8 alone (cached); or each sentence embedded alone at publish time (a second pass over its words; "
        "the torch bulk runtime always does this). The answers' dev figures are within one question of each other "
        "(docs/benchmarks.md). Pooled vectors have their own name in the embedding cache.",
    )
    documents: Literal["fp32", "int8"] = Field(
        "fp32",
        description="The encoder of document vectors (a publish, a repair) on the onnx bulk runtime: fp32, or the "
        "dynamic int8 model answers' questions use (about 1.5x less CPU per chunk; SciFact test nDCG@10 hybrid "
        "-0.003, vector lane -0.006, so fp32 stays the default: docs/benchmarks.md). Each encoder has its own "
        "vectors: its own key in the embedding cache and its own vector collections, so the two never mix; changing "
        "it re-embeds every published chunk when a writer next opens the store (docs/architecture.md).",
    )
    int8_queries: bool = Field(
        True,
        description="ONNX: queries through a dynamic int8 model (about 1.6x less CPU per query than fp32, cosine "
        ">= 0.99 to it); a query vector is never cached or indexed, so it may come from another encoder than the "
        "documents'.",
    )
    int8_search_all: bool = Field(
        True,
        description="ONNX with int8 queries: a search's queries (search_knowledge, /v1/search, `rag search`) through "
        "the int8 model quantized throughout, about 0.66x the CPU of the one an answer's question goes through, "
        "which keeps the feed-forward outputs fp32: an answer picks sentences by their similarity to the question, "
        "and the cheaper model's vectors changed some of those picks (docs/benchmarks.md). Queries under 7 tokens "
        "take the answers' model, where the cheaper one loses most.",
    )
    threads: int = Field(
        0, ge=0, le=256,
        description="Threads for document batches (0: one per core; `rag serve` sets 1 on torch): on ONNX Runtime that many "
        "runs side by side, each on one thread (less CPU per text than threads inside one run); on torch its "
        "intra-op threads. Every other ONNX call (a query, an answer's sentences) runs on one thread, so that "
        "concurrent calls run side by side.",
    )
    onnx_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_cache_dir("rag", appauthor=False)) / "onnx",
        description="Where the exported ONNX files live (written by `python -m rag.models.export_onnx`).",
    )

    @model_validator(mode="after")
    def _int8_documents_on_onnx(self) -> EmbedSettings:
        if self.documents != "fp32" and (self.backend, self.bulk_backend) != ("onnx", "onnx"):
            raise ValueError("int8 document vectors (embed.documents) need the onnx backend and bulk_backend")
        return self


LANE_WEIGHTS = {"vector": 0.8, "text": 1.2, "title": 0.0, "bridge": 0.6}


class RetrieveSettings(BaseModel):
    """The retriever stage: the search index's lanes, reciprocal rank fusion, the step after it."""

    lanes: list[Literal["vector", "text", "title"]] = Field(
        default_factory=lambda: ["vector", "text", "title"], min_length=1,
        description="The lanes of the search index, in order (rag/retrieve/index.py builds them); the default's "
        "title lane only where the keyword engine is tantivy (the embedded store), since it is one. A lane added "
        "to a store that has chunks is filled by the next writer that opens it.",
    )
    rrf_k: int = Field(60, ge=1)
    # The vector and text weights sum to 2, so first place in both lanes still scores 1/61 + 1/61.
    # Vector 0.8 / text 1.2 / bridge 0.6 with z-score fusion: chosen by `python -m evals.tune_fusion`.
    # The title lane weighs 0: it is not asked the question, it serves the bridge.
    weights: dict[str, float] = Field(
        default_factory=lambda: dict(LANE_WEIGHTS),
        description="How much each lane counts, by name: its weight in reciprocal rank fusion and in score fusion "
        "(JSON, or one lane at a time: RAG_RETRIEVE__WEIGHTS__TEXT=1.0); a lane not named keeps its default "
        "weight, 1.0 for a lane without one.",
    )
    vector_weight: float | None = Field(
        None, ge=0.0, le=2.0,
        description="Deprecated, kept for existing deployments: sets the vector lane's weight to it and the text "
        "lane's to 2 minus it, as before the weights mapping (a lane named in `weights` wins).",
    )
    rerank: Literal["scores", "none"] = Field(
        "scores",
        description="The step after fusion: `scores` (the default) orders the fused candidates by the lanes' own "
        "scores, each normalised over the candidates (rag/retrieve/rerank.py; better than rank-only fusion on "
        "SciFact and HotpotQA, docs/benchmarks.md); `none` keeps reciprocal rank fusion's order.",
    )
    score_norm: Literal["minmax", "zscore", "max"] = Field(
        "zscore",
        description="Score fusion: how each lane's scores are put on one scale over a query's candidates (min-max, "
        "z-scores, or divided by the best with 0 as no match); a candidate a lane did not return gets the lane's "
        "floor after normalisation (rag/retrieve/fusion.py).",
    )
    bridge: Literal["title", "none"] = Field(
        "title",
        description="After the lanes are fused, the `title` lane is searched again with the words of the first "
        "result (its first `bridge_terms` distinct words), and that ranking joins fusion as the lane `bridge` "
        "(weight `weights.bridge`): a question whose answer is in a second document named by the first finds "
        "that one by its title. Needs the title lane (tantivy); `none`, a weight of 0 or no title lane: off.",
    )
    bridge_terms: int = Field(64, ge=1, le=256, description="Distinct words of the first result the bridge searches with.")
    candidates: int = Field(100, ge=1, le=1000, description="Hits each lane contributes to fusion.")
    per_document: int = Field(
        2, ge=0, le=50,
        description="At most this many excerpts of one document in the first `diversity_window` results of a "
        "search (search_knowledge, /v1/search, search_knowledge_base), unless fewer documents match (0: no cap). "
        "The excerpts held back follow, in their order. An answer's excerpts are not capped.",
    )
    diversity_window: int = Field(10, ge=1, le=100, description="How many first results `per_document` caps.")
    keyword_engine: Literal["tantivy", "fts5"] = Field(
        "tantivy",
        description="Keyword lane on the SQLite store: a tantivy index in home (fast at any size) or SQLite "
        "FTS5. PostgreSQL uses its own full text.",
    )
    keyword_max_df: float = Field(
        0.2, gt=0.0, le=1.0,
        description="FTS5 and PostgreSQL: the keyword lane leaves out query words found in more than this share of chunks "
        "(keeping at least the two rarest): they barely move BM25 and cost most of its time. 1.0 keeps all.",
    )
    excerpt_chars: int = Field(2000, ge=100)

    @model_validator(mode="before")
    @classmethod
    def _lane_weights(cls, data: Any) -> Any:
        """The weights given are laid over the defaults (and the deprecated vector_weight), so that
        setting one lane's weight (`RAG_RETRIEVE__WEIGHTS__TEXT`) keeps the others'."""
        if not isinstance(data, dict):
            return data
        given = data.get("weights") or {}
        if not isinstance(given, dict):
            return data  # not a mapping: the field's own validation says so
        weights = dict(LANE_WEIGHTS)
        legacy = data.get("vector_weight")
        if legacy is not None:
            try:
                weights.update(vector=float(legacy), text=2.0 - float(legacy))
            except (TypeError, ValueError):
                pass  # the field's own validation says so
        return {**data, "weights": {**weights, **given}}

    @model_validator(mode="after")
    def _weights_not_negative(self) -> "RetrieveSettings":
        if any(w < 0 for w in self.weights.values()):
            raise ValueError("retrieve.weights must not be negative")
        return self


class LLMSettings(BaseModel):
    """Model calls through litellm (the model itself is ``RAG_LLM_MODEL``)."""

    fallbacks: list[str] = Field(
        default_factory=list, description="Models tried in order when the main one keeps failing (JSON list)."
    )
    api_base: str | None = Field(None, description="Base URL of an OpenAI-compatible server, Ollama or vLLM.")
    api_key: SecretStr | None = Field(None, description="API key; default: the provider's own variable.")
    timeout: float = Field(60.0, gt=0, description="Seconds one request may take.")
    deadline: float = Field(120.0, gt=0, description="Seconds all attempts and fallbacks together may take.")
    max_attempts: int = Field(4, ge=1, le=20, description="Attempts per model on transient failures.")
    backoff_initial: float = Field(1.0, ge=0, description="First wait between attempts, doubled each time.")
    backoff_max: float = Field(8.0, ge=0)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(1024, ge=16, le=32768)
    mock_response: str | None = Field(
        None, description="Tests and demos: litellm returns this text instead of calling the model."
    )


class AnswerSettings(BaseModel):
    """The synthesis stage: which excerpts an answer draws on and when it abstains (the relevance
    check, in front of both synthesizers). The extractive answer's other numbers are not settings:
    they live in rag/synthesize/extractive/tuning.py, each with the evaluation that set it."""

    excerpts: int = Field(8, ge=1, le=25, description="Retrieved excerpts numbered for the answer.")
    min_similarity: float = Field(
        0.33, ge=-1.0, le=1.0,
        description="Abstain unless some excerpt's vector similarity to the question reaches this...",
    )
    min_excerpt_similarity: float = Field(
        0.25, ge=-1.0, le=1.0,
        description="Once a question is answerable, the excerpts an answer may draw on reach this similarity "
        "(or the coverage rule).",
    )
    min_coverage: float = Field(
        0.75, ge=0.0, le=1.0,
        description="...or some excerpt holds this share of the question's words (stemmed, stop words out).",
    )
    extractive_sentences: int = Field(4, ge=1, le=10, description="Sentences in an extractive answer.")
    extractive_embed: int = Field(
        48, ge=1, le=256,
        description="Extractive: sentences embedded per question, the best by the cheap score (each "
        "excerpt document's best one always is).",
    )


class ParseSettings(BaseModel):
    """Bounds of every binary parser (PDF, Word, HTML), each file parsed in a worker process
    (rag/ingest/sandbox.py). A file past a bound fails alone (`file_too_complex`, naming it)."""

    workers: int | None = Field(
        None, ge=1, le=256,
        description="Worker processes that parse files, so files parsed at once (the rest wait their turn); "
        "default: the number of cores.",
    )
    memory_mib: int = Field(
        1536, ge=256, le=1024 * 1024,
        description="A worker's address space while it parses a file, in MiB (RLIMIT_AS): a decompression bomb "
        "stops here.",
    )
    cpu_seconds: int = Field(120, ge=1, le=86_400, description="CPU time one file may take (RLIMIT_CPU).")
    timeout_seconds: float = Field(
        180.0, gt=0, le=86_400,
        description="Wall-clock time one file may take once a worker has it; the worker is killed then.",
    )
    max_chars: int = Field(
        20_000_000, ge=1000, le=1_000_000_000,
        description="Characters of text one file may yield (a document made by an upload holds at most 2,000,000).",
    )
    ocr_command: str = Field(
        "tesseract", max_length=4096,
        description="The tesseract command that reads images and PDF pages with no text layer (OCR): a name on PATH "
        "or a path. Where it is not found, or this is empty, such files are refused saying how to install it "
        "(scripts/install.sh --ocr).",
    )
    ocr_languages: str = Field(
        "eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
        description="The languages OCR reads, as tesseract names them (`eng+deu`); each needs its language data "
        "(Debian: tesseract-ocr-deu).",
    )
    ocr_max_pages: int = Field(
        300, ge=1, le=100_000,
        description="Pages (image frames, PDF pages with no text layer) OCR may read in one file; a file with more "
        "is refused.",
    )
    ocr_page_seconds: float = Field(
        60.0, gt=0, le=86_400,
        description="Wall-clock (and CPU) seconds OCR may take on one page; tesseract is killed past it and the file "
        "refused.",
    )
    ocr_seconds: float = Field(
        600.0, gt=0, le=86_400,
        description="Seconds OCR may take on one file, its pages' rendering included; a PDF or image gets these on "
        "top of `timeout_seconds` (a dense 300-dpi page takes ~2 s of CPU).",
    )
    upload_ocr_seconds: float = Field(
        30.0, gt=0, le=86_400,
        description="Seconds OCR may take on one uploaded file (and on one of its pages), in place of `ocr_seconds` "
        "and `ocr_page_seconds` where those are larger: a request waits for it, while a source's sync has the "
        "larger budget (a scan of many pages belongs in a source).",
    )
    caller_workers: int | None = Field(
        None, ge=1, le=256,
        description="Workers one caller (an upload's token, a source's sync, an ingest) may hold at once; the "
        "others' files are served in turn. Default: all but one (at least one), so another caller always finds a "
        "worker free; set it to `workers` where one caller alone parses (a machine that only ingests).",
    )

    @property
    def worker_count(self) -> int:
        return self.workers or os.cpu_count() or 1


class UploadSettings(BaseModel):
    """`POST /v1/uploads` beside its size (`upload_max_bytes`)."""

    per_token: int = Field(
        2, ge=1, le=1024,
        description="Uploads one token (or one signed-in editor) may have in progress at once; another is refused "
        "with 429 (`too_many_uploads`) until one ends. Counted across every process of a PostgreSQL store.",
    )


class McpSettings(BaseModel):
    """The MCP server over streamable HTTP (`/mcp` of `rag serve`) on the embedded store, where it keeps
    sessions (on the scale-out store each request stands alone, and these do not apply)."""

    sessions_per_token: int = Field(32, ge=1, le=10_000, description=(
        "MCP sessions one token may hold open. Opening one more closes that token's session idle longest; when "
        "every one has a request in flight (an open GET stream counts), the new one is refused with 429."
    ))
    session_idle_seconds: float = Field(1800.0, gt=0, le=7 * 24 * 3600, description=(
        "Seconds an MCP session may go without a request in flight before it is closed (its id then answers 404 "
        "and the client opens a new one)."
    ))


def _header_list(value: Any) -> Any:
    """A list setting from the environment: a JSON list, or names separated by commas (`[::1]` too)."""
    if not isinstance(value, str):
        return value
    if value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            pass  # `[::1],localhost`: an address, not JSON
    return [part.strip() for part in value.split(",") if part.strip()]


class QuotaSettings(BaseModel):
    """Calls per minute per token, and per principal across its tokens (rag/service/quotas.py);
    0: unlimited. Over a rate: 429 `rate_limited` with Retry-After (over MCP, the tool's error)."""

    search_per_minute: int = Field(1200, ge=0, le=1_000_000, description="Searches (HTTP and MCP).")
    ask_per_minute: int = Field(240, ge=0, le=1_000_000,
                                description="Answers: /v1/ask, /v1/chat/completions, the MCP ask tool, the editor.")
    upload_per_minute: int = Field(60, ge=0, le=1_000_000, description="Files uploaded (POST /v1/uploads).")
    write_per_minute: int = Field(1200, ge=0, le=1_000_000,
                                  description="Changes of content: drafts, publishes, moves, deletes, ingests.")
    burst_seconds: float = Field(30.0, gt=0, le=3600,
                                 description="How many seconds' worth of a rate may come at once, before the rate holds.")
    streams_per_token: int = Field(
        8, ge=0, le=10_000, description="Answers one token may stream at once (0: unlimited; counted across every "
        "process of a PostgreSQL store); "
        "one more is refused with 429 `too_many_streams`.")


class TelemetrySettings(BaseModel):
    """Metrics and traces (rag/telemetry.py)."""

    enabled: bool = Field(True, description="Count requests and stages for /metrics and trace them (traces are "
                          "exported only when OTEL_EXPORTER_OTLP_ENDPOINT is set). Off: nothing is counted or traced.")
    metrics_token: SecretStr | None = Field(
        None, description="The bearer token a scrape of /metrics must send (not an API token). None: /metrics "
        "answers clients on this machine (loopback) only.")


class LogSettings(BaseModel):
    """Where `rag serve` writes its log, and how (rag/logs.py). `rag mcp`, whose standard output is
    the protocol, and the one-shot commands always write to the file under home."""

    format: Literal["auto", "json", "text"] = Field(
        "auto", description="`json`: one JSON object a line (time, level, logger, message, request_id, "
        "principal); `text`: one readable line; `auto`: JSON on standard output, text in the file.")
    to: Literal["auto", "stdout", "file"] = Field(
        "auto", description="`rag serve`'s log: `stdout` (a container's log), `file` (home/logs/rag.log, rotated), "
        "or `auto`: standard output when it is not a terminal, else the file.")


class HttpSettings(BaseModel):
    """`rag serve`'s HTTP connections: how long a client may take to send a request, and how many
    connections one process keeps open (rag/api/server.py)."""

    header_timeout_seconds: float = Field(
        10.0, gt=0, le=3600,
        description="A request's line and headers must all arrive within this many seconds of the connection "
        "opening or of the head's first byte; otherwise the connection is closed (408 when part of a head came).",
    )
    body_timeout_seconds: float = Field(
        30.0, gt=0, le=3600,
        description="A request body may take this many seconds, plus one more second per "
        "`body_min_rate_bytes` received; a body that trickles slower is cut (408). Time the server itself "
        "spends not reading does not count.",
    )
    body_min_rate_bytes: int = Field(
        1024, ge=1, le=1024 * 1024 * 1024,
        description="The slowest average rate, in bytes a second, a long request body may arrive at.",
    )
    keep_alive_seconds: float = Field(
        5.0, gt=0, le=3600,
        description="A connection idle after a response is closed after this many seconds (uvicorn's "
        "timeout_keep_alive); behind a proxy that keeps connections open longer, raise it above the proxy's.",
    )
    max_connections: int | None = Field(
        None, ge=1, le=1_000_000,
        description="Open connections per server process. Beyond it the oldest connection still waiting for a "
        "request head is closed, or, when none waits, the new one is answered 503 and closed. Default: 1024, "
        "or less where the open-file limit leaves less room (the store keeps 256 files or a quarter of the "
        "limit for itself). A value above that room is lowered to it.",
    )
    backlog: int = Field(
        2048, ge=1, le=65535,
        description="Connections the kernel queues before the server accepts them (they hold no file of the "
        "process until accepted).",
    )
    shutdown_seconds: float = Field(
        20.0, ge=0, le=3600,
        description="On SIGTERM the server stops accepting, ends event streams with a last event, and waits this "
        "long for the requests in progress before it closes them and exits (keep it below the orchestrator's "
        "grace period: Kubernetes' 30 s, docker/compose.yaml's stop_grace_period).",
    )
    ping_seconds: float = Field(
        15.0, gt=0, le=3600,
        description="An event stream with nothing to send for this long gets a comment line (`: ping`), so that "
        "proxies and clients do not take it for a dead connection.",
    )


class SourceSettings(BaseModel):
    """Syncing sources (rag/service/sources/): bounds on every fetch, and the schedule's clock."""

    max_item_bytes: int = Field(50 * 1024 * 1024, ge=1024, le=2**34, description="Largest item one fetch reads.")
    request_timeout_seconds: float = Field(30.0, gt=0, le=3600, description="One request: connecting, and each read.")
    item_timeout_seconds: float = Field(
        120.0, gt=0, le=86_400, description="One item's whole fetch, redirects and retries included.")
    max_items: int = Field(100_000, ge=1, le=10_000_000, description="Items one listing may hold.")
    concurrency: int = Field(4, ge=1, le=64, description="Items fetched at once by one sync.")
    attempts: int = Field(3, ge=1, le=10, description="Attempts per transient failure, with exponential backoff.")
    backoff_seconds: float = Field(0.5, ge=0, le=60, description="First wait between attempts, doubled each time.")
    batch: int = Field(32, ge=1, le=1000, description="Items stored per transaction (what a killed sync redoes at most).")
    poll_seconds: float = Field(
        30.0, gt=0, le=86_400, description="How often `rag serve` looks for sources that are due.")
    lease_seconds: float = Field(
        120.0, ge=5, le=86_400,
        description="How long a sync holds its source without renewing (a killed sync's source is free again after it).")
    allow_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Hosts sources may reach although private or loopback (comma-separated); only this "
        "setting allows one: a source's own `allow_hosts` may only narrow it. Cloud metadata addresses and "
        "`rag serve`'s own address and port are refused whatever it names.")
    local_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Directories (comma-separated) under which a source added or changed through the API, "
        "MCP or the editor may read local paths (a folder, an export, a local Git repository), checked "
        "after resolving links on every sync; none: no such source may. RAG_HOME is refused inside them. "
        "Sources added by `rag source add` on the command line are exempt until an admin changes them.")
    min_every_seconds: int = Field(60, ge=1, le=86_400, description="The shortest schedule a source may have.")
    scheduler: bool = Field(True, description="`rag serve` runs sources when they are due.")

    @field_validator("allow_hosts", "local_roots", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        return _header_list(value)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_nested_delimiter="__", extra="ignore", validate_default=True
    )

    home: Path = Field(
        default_factory=default_home,
        description="Directory that holds all state of the embedded default.",
    )
    database_url: str | None = Field(
        None, description="SQLAlchemy URL; default: a SQLite file in home. A secret (its password): "
        "RAG_DATABASE_URL_FILE may name a file holding it.", json_schema_extra={"secret": True})
    chroma_url: str | None = Field(None, description="Chroma server URL; default: embedded Chroma in home.")
    embed_model: str = Field(
        LOCAL_EMBED_MODEL,
        description="'local:all-MiniLM-L6-v2' (offline, packaged) or any litellm embedding model name.",
    )
    embed: EmbedSettings = Field(default_factory=EmbedSettings)
    embed_cache: Path | None = Field(
        None, description="SQLite file caching embeddings by model and text; default: home/embeddings.sqlite."
    )
    llm_model: str | None = Field(None, description="litellm model name for synthesis; none: extractive.")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    publish_poll_seconds: float = Field(
        2.0, gt=0, le=3600,
        description="PostgreSQL store: how often each writer looks for publish jobs no worker holds (a killed "
        "worker's).",
    )
    default_workspace: str = "default"
    default_kb: str = "default"
    first_token: bool = Field(
        True, description="`rag serve` on a store where no person has a token makes an admin token and writes its "
        "secret to home/admin-token. Turn it off where each server's home is its own and short-lived (the "
        "Kubernetes manifests): make the first token with `rag token create` instead.")
    upload_max_bytes: int = Field(
        25 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024,
        description="The largest file `POST /v1/uploads` takes, in bytes (a larger one is refused with 413).",
    )
    uploads: UploadSettings = Field(default_factory=UploadSettings)
    parsing: ParseSettings = Field(default_factory=ParseSettings)
    search_threads: int = Field(
        2, ge=1, le=64,
        description="`rag serve`: how many searches and extractive answers run at once (the others wait their "
        "turn). They hold Python's interpreter lock most of the time, so more threads than cores only add "
        "switching (rag/api/compute.py).",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        ["localhost"],
        description="Host header values the server answers on /mcp (comma-separated or a JSON list): `name` any "
        "port, `name:port` that port; an IP address always passes. Other names get 403 (DNS rebinding). Set it "
        "to the names clients use when serving beyond loopback (docker/compose.yaml: rag:8000).",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        [],
        description="Browser origins (`scheme://name[:port]`, `:*` any port) that may call the server: the CORS "
        "list (rag/api/cors.py) and /mcp's Origin check. A request without Origin (no browser) and one from the "
        "server's own origin pass; on /mcp any other Origin gets 403.",
    )
    mcp: McpSettings = Field(default_factory=McpSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    quota: QuotaSettings = Field(default_factory=QuotaSettings)
    retrieve: RetrieveSettings = Field(default_factory=RetrieveSettings)
    sources: SourceSettings = Field(default_factory=SourceSettings)
    source_secrets: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="The secrets sources name: RAG_SOURCE_SECRETS__<NAME>=value, or RAG_SOURCE_SECRETS__<NAME>_FILE="
        "a file holding it. Never stored, exported or logged.")

    def source_secret(self, name: str) -> str | None:
        """The value of the secret a source names (its `_FILE` form read from its file); None when unset."""
        key = name.lower()
        value = self.source_secrets.get(key)
        if value is not None:
            return value.get_secret_value()
        path = self.source_secrets.get(f"{key}_file")
        if path is None:
            return None
        try:
            return Path(path.get_secret_value()).read_text().strip()
        except OSError:
            return None

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then the secrets' `_FILE` variables, then the
        configuration file (RAG_CONFIG), then the defaults."""
        return init_settings, env_settings, SecretFileSource(settings_cls), ConfigFileSource(settings_cls)

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        return _header_list(value)

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts_well_formed(cls, value: list[str]) -> list[str]:
        from rag.origins import host_rule

        for entry in value:
            host_rule(entry)  # a clear ValueError at start, not a refusal of every request
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins_well_formed(cls, value: list[str]) -> list[str]:
        from rag.origins import origin_rule

        for entry in value:
            origin_rule(entry)
        return value

    @cached_property
    def sqlalchemy_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'rag.db'}"

    @property
    def embedded(self) -> bool:
        """True when some engine lives inside this process (SQLite file or embedded Chroma)."""
        return self.sqlalchemy_url.startswith("sqlite") or not self.chroma_url

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def keyword_path(self) -> Path:
        return self.home / "keyword"

    @property
    def embed_cache_path(self) -> Path:
        return self.embed_cache or self.home / "embeddings.sqlite"


# ----- the sources beside the environment (rag/config_file.py reads the files) -----

def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The settings model a field holds (its settings are nested under its name), else None."""
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _is_secret(field: Any) -> bool:
    """A SecretStr (or an optional one), or a value marked secret (the database URL, for its password)."""
    annotation = field.annotation
    union = get_origin(annotation) in (Union, types.UnionType)
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return annotation is SecretStr or (union and SecretStr in get_args(annotation)) or bool(extra.get("secret"))


def secret_settings(model: type[BaseModel] = Settings, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every secret setting, nested ones included: ('database_url',), ('llm', 'api_key').
    (`source_secrets` holds many, each with its own `_FILE` form: Settings.source_secret.)"""
    for name, field in model.model_fields.items():
        inner = nested_model(field.annotation)
        if inner is not None:
            yield from secret_settings(inner, (*prefix, name))
        elif _is_secret(field):
            yield (*prefix, name)


class SecretFileSource(PydanticBaseSettingsSource):
    """Each secret setting read from the file its `_FILE` variable names (RAG_LLM__API_KEY_FILE)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False  # unused: __call__ reads them all

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for path in secret_settings(self.settings_cls):
            secret = read_secret_file(file_variable(path))
            if secret is not None:
                *tables, name = path
                target = values
                for table in tables:
                    target = target.setdefault(table, {})
                target[name] = secret
        return values


class ConfigFileSource(TomlConfigSettingsSource):
    """The TOML file RAG_CONFIG names: read within bounds, every key a setting (else a ConfigError)."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        self.path = config_path()
        super().__init__(settings_cls, toml_file=self.path)

    def _read_files(self, files: Any, deep_merge: bool = False) -> dict[str, Any]:
        if self.path is None:
            return {}
        data = read_config(self.path)
        if (problem := unknown_setting(data)) is not None:
            raise ConfigError(f"config file {self.path}: {problem}")
        return data


def unknown_setting(data: dict[str, Any], model: type[BaseModel] = Settings, prefix: str = "") -> str | None:
    """What is wrong with the first key of a configuration file's tables that names no setting."""
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            problem = f"unknown setting {prefix + key!r}"
            flat = (prefix + key).replace(".", "_")  # [llm] model = … for the top-level llm_model
            if prefix and (key in Settings.model_fields or flat in Settings.model_fields):
                name = key if key in Settings.model_fields else flat
                return f"{problem}: {name!r} is a top-level setting, so it goes above the first [table]"
            close = difflib.get_close_matches(key, list(model.model_fields), n=1)
            return f"{problem} (did you mean {prefix + close[0]!r}?)" if close else problem
        inner = nested_model(field.annotation)
        if inner is not None and isinstance(value, dict):
            if (problem := unknown_setting(value, inner, f"{prefix}{key}.")) is not None:
                return problem
    return None
