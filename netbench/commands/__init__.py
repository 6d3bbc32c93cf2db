"""One module per CLI command; each exports ``command``. See netbench/cli.py."""
