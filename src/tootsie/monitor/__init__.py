"""monitor: metric trackers, curve plots and run reports."""
