"""datakit: raw text → normalized Parquet documents → splits → tokenizer → token cache.

Each stage is a plain function `stage(config, output_path)` over a frozen config,
so it runs from the CLI, from Python, or as an executor step with its output
path chosen by the config's hash.
"""
