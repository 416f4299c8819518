"""Export: the search a run serves, tuned and held against the lead baseline
and a teacher's member (`served_search`), and the SavedModel written
(`saved_model`, run as `python -m models.export`)."""
