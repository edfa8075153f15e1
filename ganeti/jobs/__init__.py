"""Jobs: the model, the on-disk queue, scheduling, and the job process."""
