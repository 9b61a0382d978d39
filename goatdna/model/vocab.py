"""The model's vocabulary: one token per base, ``A C G T N = 0..4``, N an input-only token.

These ids are the contract between the shards, the model and exported tokenizers, so they are
written once per side of the torch boundary and pinned equal by a test:

* here, for everything that ships with the model: `scoring.IGNORE_TARGET` (= N), the classifier's
  padding and complement table, `ModelConfig.vocab_size`, and the Hugging Face tokenizer. This
  file imports nothing, so ``goatdna export`` ships it verbatim with the rest of goatdna/model and
  the package still needs torch alone (DESIGN.md);
* `goatdna.data_prep.tokens`, for the shards' byte encoding (plus the soft-mask flag and IUPAC
  codes). data_prep does not import this module: goatdna.model is torch's side of the boundary,
  and data_prep knows nothing of torch.

``tests/test_tokens.py::test_model_vocabulary_is_the_shards_vocabulary`` asserts the two agree
(ids, letters, size, complement), so a change to one without the other fails CI.
"""

from __future__ import annotations

A, C, G, T, N = 0, 1, 2, 3, 4
BASES = "ACGTN"
"""Letter of each id: ``BASES[i]`` is the base with token id ``i``."""
VOCAB_SIZE = len(BASES)
NUM_BASES = N
"""A C G T are the ids below N; the model predicts them and never generates N."""
COMPLEMENT = (T, G, C, A, N)
"""id -> id of the complementary base (A<->T, C<->G, N->N)."""
