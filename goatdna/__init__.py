"""goatdna: nucleotide-level language models of the human genome with GOAT attention priors."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("goatdna")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
