"""Parsers: pure functions from one tool's text output to inventory dataclasses.

One small module per format. Every parser takes the raw text (stdout+stderr as the probe captured it)
and returns model objects or small result dataclasses; none runs a command, touches the network, or
evaluates anything it reads: remote output is untrusted data. Parsers are tolerant (unknown lines are
skipped, ``N/A``-style values become ``None``) and raise only when the text is not that format at all,
which ``inventory.assemble`` turns into a "parse error in <section>" entry of ``missing``.
"""
