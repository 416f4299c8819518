"""The Keras model: the summarizer (`summarizer`, keras_attn's decoder over
its layers, with its target embedding and output layer in
`vocabulary_layers`, its sampled softmax and the test of a multi-worker
strategy), an ensemble of its members
(`ensemble`), the member folders of a run and whether each is served
(`members`), and a run folder's features and trained model loaded back
(`run_folder`)."""
