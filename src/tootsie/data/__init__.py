"""data: token caches → packed sequences → shuffled, mixed, stateless `batch(step)`."""
