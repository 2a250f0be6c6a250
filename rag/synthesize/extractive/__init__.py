"""The extractive answer (no model): a question analysed once, sentences scored by declared
features, a pipeline of named steps, every number in `tuning`. See synthesizer.py."""

from rag.synthesize.extractive.draft import Candidate, Draft
from rag.synthesize.extractive.synthesizer import ExtractiveSynthesizer
from rag.synthesize.extractive.tuning import TUNING, Tuning

__all__ = ["Candidate", "Draft", "ExtractiveSynthesizer", "TUNING", "Tuning"]
