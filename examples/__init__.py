"""Examples a user copies into their own code: forecasting with attention
(`python -m examples.forecast`), the tfa.seq2seq migration
(`python -m examples.tfa_migration`) and TensorFlow Addons' NMT tutorial
ported (`python -m examples.tfa_nmt_tutorial`), and its beam search run by
ONNX Runtime and LiteRT (`python -m examples.deploy_beam_search FOLDER`)."""
