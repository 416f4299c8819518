"""The scripts behind the figures of BENCHMARKS.md (`benchmarks/README.md`
indexes them); run each from the repository root as
`python -m benchmarks.<script>`."""
