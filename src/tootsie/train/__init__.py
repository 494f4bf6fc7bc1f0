"""train: losses, optimizers, schedules, checkpoints and the training loop."""
