"""Import transformers' own common tests from the installed version's source distribution.

`.ci/transformers_tests` downloads the sdist of the installed transformers version and extracts
its ``tests/*.py`` into a cache folder as the package ``transformers_tests``, then runs this
folder with ``GOATDNA_TRANSFORMERS_TESTS`` pointing there. Nothing of transformers is in this
repository. The sdist omits three modules the common files import; they are stood in for here
(`_stand_ins`), and what they would have tested is listed in `test_transformers_common.SKIPS`.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

SDIST_ENV = "GOATDNA_TRANSFORMERS_TESTS"
PACKAGE = "transformers_tests"


class GenerationTesterMixin:
    """Stand-in for transformers' tests/generation/test_utils.py (not in the sdist): the class
    test_modeling_common imports. No goatdna tester inherits it; generation is tested in
    tests/test_hf_features.py."""


class ExportTesterMixin:
    """Stand-in for tests/exporters/test_export.py (not in the sdist); torch.export is tested
    in tests/test_hf_features.py."""


# tests/utils/test_configuration_utils.py is not in the sdist either: the generic
# PretrainedConfig arguments that ConfigTester.check_config_arguments_init sets and reads back
config_common_kwargs = {
    "return_dict": False,
    "output_hidden_states": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["GoatDNAForCausalLM"],
    "finetuning_task": "promoters",
    "id2label": {0: "no", 1: "yes"},
    "label2id": {"no": 0, "yes": 1},
    "tokenizer_class": "GoatDNATokenizer",
    "problem_type": "single_label_classification",
}


def _stand_ins() -> None:
    for name, attrs in (
        ("generation.test_utils", {"GenerationTesterMixin": GenerationTesterMixin}),
        ("exporters.test_export", {"ExportTesterMixin": ExportTesterMixin}),
        ("utils.test_configuration_utils", {"config_common_kwargs": config_common_kwargs}),
    ):
        parent = f"{PACKAGE}.{name.split('.')[0]}"
        if parent not in sys.modules:
            package = types.ModuleType(parent)
            package.__path__ = []
            sys.modules[parent] = package
        module = types.ModuleType(f"{PACKAGE}.{name}")
        module.__dict__.update(attrs)
        sys.modules[module.__name__] = module


def _auto_name_rows() -> None:
    """goatdna's rows in transformers' auto name tables, as an in-tree model has them: the
    mixin reads these tables (not the registered Auto classes) to know which class is the bare
    trunk (no loss) and which head gets which labels."""
    from transformers.models.auto import modeling_auto

    for table, name in (
        ("MODEL_MAPPING_NAMES", "GoatDNAModel"),
        ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "GoatDNAForCausalLM"),
        ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "GoatDNAForSequenceClassification"),
    ):
        getattr(modeling_auto, table)["goatdna"] = name


def _sample_text(package: Path) -> None:
    """tests/fixtures/sample_text.txt (not in the sdist), which TokenizerTesterMixin.setUpClass
    reads: DNA lines, the text a nucleotide tokenizer encodes."""
    path = package / "fixtures" / "sample_text.txt"
    if not path.is_file():
        path.parent.mkdir(exist_ok=True)
        rows = ("ACGT" * 15, "GATTACA" * 8, "ttagggnnnnccctaa" * 4)
        path.write_text("\n".join(rows) + "\n")


def _install() -> None:
    root = os.environ.get(SDIST_ENV)
    folder = Path(root) if root else None
    if folder is None or not (folder / PACKAGE / "test_modeling_common.py").is_file():
        raise pytest.UsageError(
            f"{SDIST_ENV} must name a folder holding {PACKAGE}/test_modeling_common.py from the "
            "installed transformers' sdist: run .ci/transformers_tests"
        )
    sys.path.insert(0, str(folder))
    _stand_ins()
    _sample_text(folder / PACKAGE)
    _auto_name_rows()


_install()


def pytest_configure(config: pytest.Config) -> None:
    """transformers' own test markers (its pytest setup is not in the sdist either)."""
    for marker in (
        "flash_attn_test",
        "flash_attn_3_test",
        "flash_attn_4_test",
        "torch_compile_test",
        "torch_export_test",
        "generate",
    ):
        config.addinivalue_line("markers", f"{marker}: a transformers test marker")
