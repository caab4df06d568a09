"""The evaluator of a supervised task: an episode is a batch of labelled examples, scored by the
individual's mean log-likelihood of the right labels (Zhang, Clune & Stanley 2017, arXiv
1712.06564, train a net on MNIST with ES this way).

Same interface as the other evaluators (a Population and Episodes in, Results out), and the same
"every row its own weights" forward: a group of individuals' rows is built from their genomes,
then one forward pass runs every example of every episode in the group, row r with its
episode's individual's weights.
- A training episode with seed s is `examples` examples of the training set drawn from s alone
  (without replacement), so its outcome depends only on (individual, seed): a mini-batch shared
  by the whole population when the algorithm gives every episode one seed (mini-batch ES), or
  each offspring's own subset when the seeds differ (NMB-ES, the paper's section 4.2).
- A validation episode (Episodes.validation) is the whole test set, whatever its seed.
Return = minus the mean cross-entropy of the batch (higher is better, as every fitness in
nevo); length = frames = examples; Results.accuracy = the share classified right.
"""

from __future__ import annotations

import time

import numpy as np

from nevo.episodes import Episodes, Results
from nevo.episodes.book import EpisodeBook
from nevo.episodes.players import plays
from nevo.tasks.supervised import Supervised, batch_of

# Examples a forward pass takes at once: the (rows, C, H, W) batch and the activations of a
# conv net stay a few tens of MB (speed: larger batches gain little once BLAS is busy).
ROWS_PER_PASS = 4096


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """(rows, classes) float64 log-probabilities of float32 logits, computed stably."""
    z = logits.astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


@plays(Supervised)
class SupervisedEvaluator:
    """Scores episodes of a labelled data set (nevo.tasks.supervised.DataSet); `forward(rows_ind,
    obs) -> (actions, logits)` is a policy's forward on the weights `weights` gives it."""

    def __init__(self, data, policy, weights, examples: int):
        self.data = data  # train_x (N, C, H, W) uint8, train_y (N,), test_x, test_y
        self.policy = policy  # nevo.nets.kernels: load(weights), forward(rows_ind, obs), release()
        self.weights = weights  # nevo.episodes.weights: rows built from genomes
        self.examples = examples

    @classmethod
    def for_task(cls, task, run_cfg, policy, weights, device: str, population: int, behaviours: bool):
        """(this evaluator for a data set, facts for config.json): batches of --examples."""
        data = task.data
        facts = {"examples": task.cfg.examples, "train": len(data.train_y), "test": len(data.test_y)}
        return cls(task.data, policy, weights, task.cfg.examples), facts

    def close(self) -> None:
        pass

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Score every episode; progress(done, total, examples) between groups. Through the one
        episode book (nevo.episodes.book): a group of episodes is a round of its slots,
        each episode's row taken as the group starts and given back as it ends; with
        Episodes.record, each episode's sample of the examples it scored (safe mutations'
        experiences)."""
        test = episodes.validation
        x, y = (self.data.test_x, self.data.test_y) if test else (self.data.train_x, self.data.train_y)
        per = len(y) if test else min(self.examples, len(y))  # examples of each episode
        group = max(1, ROWS_PER_PASS // per)  # episodes whose rows are built at once
        book = EpisodeBook(episodes, group, self.weights, x.shape[1:], x.dtype)
        accuracy = np.zeros(book.n_ep)
        if book.n_ep == 0:
            return book.results(accuracy=accuracy)
        ind, seeds = book.ind, book.seeds
        self.policy.load(self.weights.start(population, ind, min(group, book.n_ep)))
        try:
            slots = np.arange(book.start())
            while (live := slots[book.slot_ep[slots] >= 0]).size:
                eps = book.slot_ep[live]  # (k,) in order: the group's episodes
                rows = book.slot_row[live]  # (k,) the weight row of each episode's individual
                pick = np.stack([np.arange(len(y)) if test else batch_of(s, len(y), per) for s in seeds[eps]])
                if book.sample is not None:  # the examples each scored, in its batch's order
                    for j in range(per):
                        book.sample.offer(eps, x[pick[:, j]])
                pick = pick.ravel()
                owner = np.repeat(np.arange(len(eps)), per)  # (k * per,) each example's episode in the group
                logp_sum, right = np.zeros(len(eps)), np.zeros(len(eps), np.int64)
                for a in range(0, len(pick), ROWS_PER_PASS):  # one forward pass: many individuals' rows
                    part, who = pick[a : a + ROWS_PER_PASS], owner[a : a + ROWS_PER_PASS]
                    t = time.monotonic()
                    _, logits = self.policy.forward(rows[who], x[part])
                    book.forward(time.monotonic() - t)
                    logp = log_softmax(logits)[np.arange(len(part)), y[part]]
                    logp_sum += np.bincount(who, logp, minlength=len(eps))
                    right += np.bincount(
                        who, np.argmax(logits, axis=1) == y[part], minlength=len(eps)
                    ).astype(np.int64)
                accuracy[eps] = right / per
                book.end(eps, returns=logp_sum / per, lengths=per, frames=per)
                book.refill(live)
                if progress is not None:
                    progress(book.done, book.n_ep, book.frames_done)
        finally:
            self.policy.release()
        return book.results(accuracy=accuracy)
