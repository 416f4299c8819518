"""The Keras model: the summarizer (`summarizer`, with its sampled softmax
and the test of a multi-worker strategy), an ensemble of its members
(`ensemble`), the member folders of a run and whether each is served
(`members`), and a run folder's features and trained model loaded back
(`run_folder`)."""
