"""rag: a knowledge base that answers with citations."""

from __future__ import annotations

import os

# Process-wide defaults that must be in place before numpy, torch or litellm are imported.
# On a 2-core machine idle OpenBLAS threads starve torch's (a query embedding went from ~10 ms
# to ~107 ms); litellm otherwise fetches a price map from the internet at import; the local
# embedding model ships inside a package, so the model hub is never consulted.
for _name, _value in {
    "OPENBLAS_NUM_THREADS": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}.items():
    os.environ.setdefault(_name, _value)

__version__ = "0.1.0"
