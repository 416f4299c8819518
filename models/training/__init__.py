"""Training: the run's config settled from the data (`chosen_lengths`), when
to validate and stop (`schedule`), the callbacks that validate, keep the
best and back up (`callbacks`), a member fitted (`fit`), minimum-risk
fine-tuning (`risk_fine_tuning`), a teacher's headlines as a student's
summaries (`distill`), and the command's progress lines (`progress`)."""
