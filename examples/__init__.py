"""Examples a user copies into their own code: forecasting with attention
(`python -m examples.forecast`) and the tfa.seq2seq migration
(`python -m examples.tfa_migration`)."""
