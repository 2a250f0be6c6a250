"""Evaluation harnesses: retrieval quality on BEIR-layout datasets, fusion tuning."""
