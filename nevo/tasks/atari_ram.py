"""Atari behaviours: the 128-byte RAM at the end of each episode (Such et al. 2017's GA-NS).

ale-py's vector env, which the pipeline steps, exposes no RAM. But an episode is a function of
its actions: sticky actions are off and every episode starts from a seeded reset, so replaying
the recorded actions on a plain `ALEInterface` from the state that reset gives goes through the
same frames (tests/test_atari_ram.py checks screens, returns, frames and the RAM against a lone
ALEInterface stepped beside a vector env). The pipeline records each slot's actions; when an
episode ends, its actions go to a pool of worker processes (ALEInterface holds the GIL, so
threads would run one at a time) that replay it while the pipeline goes on, and its final RAM
is the behaviour. The replay emulates the episode a second time, without the screen processing
and without inference: its cost is measured in docs/performance.md.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np

RAM_BYTES = 128

# Per worker process: game -> (ALEInterface, its state after a seeded reset, minimal action set).
_emulators: dict = {}


def _emulator(game: str):
    """This process's ALEInterface of the game, made once: a seeded reset as the vector env does
    it (random_seed 0, FIRE where the game has it), whose state every replay restores."""
    if game not in _emulators:
        import ale_py
        from ale_py import roms

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        ale = ale_py.ALEInterface()
        ale.setFloat("repeat_action_probability", 0.0)
        ale.setInt("random_seed", 0)  # the pipeline's seeded reset uses seed 0
        ale.loadROM(roms.get_rom_path(game))
        actions = ale.getMinimalActionSet()
        ale.reset_game()
        if ale_py.Action.FIRE in list(actions):  # the vector env's use_fire_reset
            ale.act(ale_py.Action.FIRE)
        _emulators[game] = (ale, ale.cloneState(), actions)
    return _emulators[game]


def replay(game: str, frameskip: int, actions: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(RAM (128,) uint8 at the end, return, game frames) of the episode these actions (indices
    into the minimal action set, no-ops included) play from a seeded reset.

    Each action is repeated frameskip frames, stopping early at game over, as the vector env
    steps; frames count the reset's FIRE as ALE's episode frame counter does."""
    ale, start, action_set = _emulator(game)
    ale.restoreState(start)
    ret = 0.0
    for a in actions:
        act = action_set[a]
        for _ in range(frameskip):
            ret += ale.act(act)
            if ale.game_over():
                break
    return ale.getRAM().copy(), ret, int(ale.getEpisodeFrameNumber())


class RamReplayer:
    """A pool of worker processes that replay Atari episodes to find their final RAM."""

    def __init__(self, game: str, frameskip: int, workers: int):
        self.game, self.frameskip = game, frameskip
        # spawn, not fork: the parent runs native threads (emulators, Numba) that fork would copy
        # mid-flight.
        self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))

    def submit(self, actions: np.ndarray) -> Future:
        """Start replaying one episode's actions; the Future gives replay()'s (ram, return, frames)."""
        return self.pool.submit(replay, self.game, self.frameskip, actions)

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def collect(futures: list[Future], returns: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """(E, 128) uint8 RAM of the replayed episodes, each checked against what the pipeline saw:
    a replay that ends with another return or frame count would give a wrong behaviour."""
    out = np.empty((len(futures), RAM_BYTES), np.uint8)
    for e, f in enumerate(futures):
        ram, ret, n = f.result()
        if ret != returns[e] or n != frames[e]:
            raise RuntimeError(
                f"the RAM replay of episode {e} diverged from the pipeline (return {ret} vs "
                f"{returns[e]}, frames {n} vs {frames[e]}): its behaviour would be wrong"
            )
        out[e] = ram
    return out
