"""eval: bits-per-byte and perplexity on held-out text."""
