"""Atari from pixels, the backend in one folder: what the game is and how its episodes start
(`game`: the AtariGame kind of task, its no-ops, ale-py's vector env as the truth), nevo's own
emulator (`emulator`: ALE with the Deep GA reference's start and preprocessing), the processes
that run emulators (`worker`) and the pool that drives them (`pool`), and the evaluator that plays
a generation's episodes on them (`evaluator`, with its three pipelines: `Workers` there, where
each emulator process plays whole episodes with its own CPU forward, `in_worker`'s
EpisodePlayer; `Lockstep` and `Overlap` in `stepped`, where groups of slots step in turn with
this process's batched inference or overlapping it).

Its layer sits between the tasks (nevo.tasks, which registers AtariGame by importing this
package) and the episodes' toolkit (nevo.episodes), so this package imports only the kind, to
keep `import nevo.tasks` from loading the evaluator; nevo.evaluation.setup imports the evaluator.
"""

from nevo.atari.game import AtariGame

__all__ = ["AtariGame"]
