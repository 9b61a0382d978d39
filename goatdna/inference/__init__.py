"""Trained models applied to genomic files at scale: variant scores, likelihood tracks, embeddings."""
