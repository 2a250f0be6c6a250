"""`rag serve`'s process defaults for the local model (rag/api/app.py `serving_process`)."""

from __future__ import annotations

from rag.api.app import serving_process
from rag.settings import EmbedSettings, Settings


def test_onnx_document_batches_run_on_every_core_in_a_server(tmp_path) -> None:
    """On ONNX Runtime every call runs on one thread, so a publish's batches may use every core
    (threads 0) while queries take their turns between them; a value the operator set is kept."""
    settings = Settings(home=tmp_path)
    serving_process(settings)
    assert settings.embed.threads == 0
    chosen = Settings(home=tmp_path, embed=EmbedSettings(threads=3))
    serving_process(chosen)
    assert chosen.embed.threads == 3


def test_torch_document_batches_get_one_thread_in_a_server(tmp_path) -> None:
    """torch's intra-op threads wait on each other on a busy machine: one, unless set."""
    settings = Settings(home=tmp_path, embed=EmbedSettings(bulk_backend="torch"))
    serving_process(settings)
    assert settings.embed.threads == 1
