"""The `goatdna` command line: one module per command, each a thin shell over a library function."""
