"""The Marin runs' numbers as the seeds print them: the 8B, the 32B and the 8B Instruct SFT."""
