"""The loops and what they write: the generation loop (`loop`, every population algorithm) and
the SGD baseline's (`sgd`), the skeleton both run in (`skeleton`: a generation's row, files and
stop lines), the elite's files (`elite`), the progress line (`progress`), and ES's gradient
against the true one beside a run (`grad_corr`). The top of nevo's layers but the API and the
command: below them every folder holds one layer (docs/architecture.md)."""
