"""Export the packaged all-MiniLM-L6-v2 to ONNX (fp32, and a dynamic int8 copy), once, at install.

    python -m rag.models.export_onnx [--dir DIR] [--force]

The graph holds the whole sentence-transformers pipeline after tokenisation: BERT, mean pooling
over the attention mask, L2 normalisation (the model's modules.json: Transformer, Pooling with
`pooling_mode_mean_tokens`, Normalize): its output `sentence_embedding` is the sentence vector, and
`token_embeddings` the last hidden states it pools, from which a publish pools each sentence of a
chunk out of the chunk's own pass (rag/models/spans.py). Each file is
checked against the torch model before it is kept (cosine >= 0.99999 fp32, >= 0.99 int8 on every
sample text, each encoded alone as a query is); a file that fails is not written.

Two int8 copies, for queries (documents always get fp32 vectors), weights per channel and
activations per call:
- model-int8.onnx, an answer's question: quantized from the graph as exported, all but the
  feed-forward output projections, whose activations have outliers (quantizing them too lowered
  the worst cosine, and the handbook's answers picked other sentences: `python -m evals.handbook_ask`);
- model-int8-all.onnx, a search's query: quantized from the optimized graph, every weight, the
  fused attention's too (QAttention): ~0.66x the CPU of the other. It is checked on the samples
  of SEARCH_MIN_TOKENS tokens or more, the queries it is used for (rag/models/onnx_encoder.py).

This needs torch, transformers and onnx; query time needs none of them (rag/models/onnx_encoder.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag.errors import Unavailable
from rag.models.onnx_encoder import (
    FILES,
    FP32_FILE,
    INT8_FILE,
    SEARCH_FILE,
    SEARCH_MIN_TOKENS,
    OnnxEncoder,
    onnx_dir,
    packaged_model_dir,
)

if TYPE_CHECKING:
    from rag.settings import EmbedSettings

log = logging.getLogger(__name__)

# The feed-forward output projection of each layer (named by torch's exporter after the module path).
_FFN_OUTPUT = re.compile(r"layer\.\d+/output/dense/MatMul$")
SAMPLES = [
    "How many days of annual leave do new employees get?",
    "Vitamin D deficiency is associated with an increased risk of multiple sclerosis.",
    "Release notes\n\n- Fixed a crash when the cache directory is read-only.\n- Faster start-up.",
    "The quick brown fox jumps over the lazy dog. " * 40,  # longer than max_seq_length: truncated
    "Ünïcödé, emoji 🙂 and CJK 東京 text",
    "vpn setup",
]
FP32_MIN_COSINE = 0.99999
INT8_MIN_COSINE = 0.99


def _torch_module(model_dir: Path):
    import torch
    from transformers import AutoModel

    # Eager attention: its pattern is the one ONNX Runtime's BERT optimizer fuses into one Attention
    # node (the default, SDPA, exports as ops it does not recognise).
    bert = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class SentenceEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1), hidden

    return SentenceEncoder()


def _export_fp32(model_dir: Path, target: Path) -> None:
    import warnings

    import torch

    module = _torch_module(model_dir)
    sample = torch.ones(2, 8, dtype=torch.long)
    dynamic = {name: {0: "batch", 1: "tokens"} for name in ("input_ids", "attention_mask", "token_type_ids")}
    dynamic["sentence_embedding"] = {0: "batch"}
    dynamic["token_embeddings"] = {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            module, (sample, sample, torch.zeros_like(sample)), str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["sentence_embedding", "token_embeddings"],
            dynamic_axes=dynamic, opset_version=17, dynamo=False,
        )


def _optimize(source: Path, target: Path, model_dir: Path) -> None:
    """ONNX Runtime's BERT fusions (Attention, SkipLayerNormalization, BiasGelu, EmbedLayerNormalization):
    long batches, and fp32 queries, cost less CPU (benchmarks/embed_latency.py measures the result)."""
    import json

    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model_dir / "config.json").read_text())
    optimized = optimize_model(str(source), model_type="bert", num_heads=int(config["num_attention_heads"]),
                               hidden_size=int(config["hidden_size"]))
    if not optimized.get_fused_operator_statistics().get("Attention"):
        raise RuntimeError("ONNX Runtime's optimizer fused no attention: the exported graph is not the expected one")
    optimized.save_model_to_file(str(target))


def _quantize(source: Path, target: Path, everything: bool) -> None:
    """Dynamic int8: from the graph as exported, all but the feed-forward outputs; or, with
    `everything`, from the optimized graph, every weight matrix and the fused attention."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    excluded: list[str] = []
    if not everything:
        excluded = [n.name for n in onnx.load(str(source)).graph.node
                    if n.op_type == "MatMul" and _FFN_OUTPUT.search(n.name)]
        if not excluded:
            raise RuntimeError("the exported graph has no feed-forward output projections by the expected names")
    # The quantizer advises "pre-processing" (shape inference and graph optimization) on the root
    # logger; the graph was optimized above, so the advice is only noise in the install's output.
    advice = _Drop("Please consider to run pre-processing before quantization")
    logging.getLogger().addFilter(advice)
    try:
        quantize_dynamic(
            str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"] if everything else ["MatMul"], nodes_to_exclude=excluded,
            # The fused nodes (Attention, SkipLayerNormalization, ...) are ONNX Runtime's, which shape
            # inference does not type: their outputs are fp32.
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        logging.getLogger().removeFilter(advice)


class _Drop(logging.Filter):
    """Drops log records that start with one message."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def _reference(model_dir: Path) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir), device="cpu")
    return np.asarray(model.encode(SAMPLES, normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32)


def _check(path: Path, model_dir: Path, reference: np.ndarray, floor: float, min_tokens: int = 0) -> float:
    """The worst cosine to the torch model over the samples of at least `min_tokens` tokens."""
    encoder = OnnxEncoder(path, model_dir / "tokenizer.json")
    kept = [i for i, text in enumerate(SAMPLES) if len(encoder.tokens(text).ids) >= min_tokens]
    vectors = np.stack([encoder.encode([SAMPLES[i]])[0] for i in kept])  # one at a time, as queries are
    worst = float(np.min(np.sum(vectors * reference[kept], axis=1)))
    if worst < floor:
        raise RuntimeError(f"{path.name}: cosine to the torch model {worst:.5f} is below {floor}")
    return worst


def export(directory: Path, force: bool = False, int8: bool = True) -> dict[str, float]:
    """Write the fp32 (and int8) files into `directory`, each checked against the torch model;
    returns the worst sample cosine of each file written. Existing files are kept unless `force`."""
    model_dir = packaged_model_dir()
    directory.mkdir(parents=True, exist_ok=True)
    wanted = list(FILES) if int8 else [FP32_FILE]
    if not force and all((directory / name).exists() for name in wanted):
        return {}
    reference = _reference(model_dir)
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        exported, fp32 = Path(scratch) / "exported.onnx", Path(scratch) / FP32_FILE
        _export_fp32(model_dir, exported)
        _optimize(exported, fp32, model_dir)
        worst[FP32_FILE] = _check(fp32, model_dir, reference, FP32_MIN_COSINE)
        if int8:
            for name, source, everything, min_tokens in ((INT8_FILE, exported, False, 0),
                                                          (SEARCH_FILE, fp32, True, SEARCH_MIN_TOKENS)):
                quantized = Path(scratch) / name
                _quantize(source, quantized, everything)
                worst[name] = _check(quantized, model_dir, reference, INT8_MIN_COSINE, min_tokens)
                os.replace(quantized, directory / name)
        os.replace(fp32, directory / FP32_FILE)  # last: the fp32 file present means the export finished
    return worst


_export_lock = threading.Lock()


def encoder_file(embed: EmbedSettings, name: str) -> Path:
    """The ONNX file (one of FILES), exported now if it is missing (once per directory, whatever
    the threads)."""
    directory = onnx_dir(embed)
    path = directory / name
    if path.exists():
        return path
    with _export_lock:
        if path.exists():
            return path
        try:
            import onnx  # noqa: F401
            import torch  # noqa: F401
        except ImportError:
            log.error("no ONNX encoder in %s, and torch or onnx is missing to export it", directory)
            raise Unavailable(
                "the ONNX encoder is not exported and torch is not installed to export it: run "
                "`python -m rag.models.export_onnx` where torch is installed, or set RAG_EMBED__BACKEND=torch"
            ) from None
        log.warning("exporting the ONNX encoder into %s (once; scripts/install.sh does this at install)", directory)
        export(directory)
    return path


def main(argv: list[str] | None = None) -> int:
    from rag.settings import Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="where to write (default: RAG_EMBED__ONNX_DIR, else the user cache)")
    parser.add_argument("--force", action="store_true", help="export again even if the files exist")
    args = parser.parse_args(argv)
    directory = args.dir or onnx_dir(Settings().embed)
    worst = export(directory, force=args.force)
    if not worst:
        print(f"ONNX encoder already exported in {directory}")
    for name, cosine in worst.items():
        print(f"exported {directory / name} (worst sample cosine to the torch model {cosine:.5f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
