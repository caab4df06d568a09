"""The evaluator: episodes over many emulator slots, with batched inference overlapping emulation.

Interface (narrow and serialisable, so a remote worker can serve it later): the individuals as
genomes (a Population) plus a list of episodes (individual, episode seed) in; per episode
return, length and game frames out. Weights are built here, where they are used
(nevo.evaluation.slot_weights): on the CPU when an individual's first episode takes a slot.

The pipeline, in SEED RL's shape on one machine (Espeholt et al. 2019; the accelerated deep
neuroevolution of Uber AI, 2018): the slots are split into groups, each a synchronous ale-py
vector env whose C++ threads step its emulators. Groups are driven round robin: while group A's
emulators step (native threads, the GIL released), the forward pass for group B runs (Numba,
GIL released; or a GPU kernel), then B's actions are sent and A's results received (on a GPU,
B's step is submitted, A is received and its step submitted, then B's actions are collected and
sent: the GPU runs B's forward while this thread works). So the emulator threads and the
inference keep every core busy; neither waits for the other while there are two or more
groups. Where the forward runs on the same few cores as the emulators (the CPU backend) the two
would only fight over them, so there the groups run in lockstep: one forward over every live
group, then every live group steps (docs/performance.md).
Seeded resets of ended slots run in reset threads meanwhile (ALE frees the GIL), several of a
group's slots at a time (reset_batch_of); a group whose episodes are all over is reset there
too, at once, so the next run starts without waiting. The emulator and reset threads run nicer
than the thread that drives them all.

A queue of episodes (individual, episode seed) feeds the slots: when an episode ends its slot
takes the next one at its group's next seeded reset; when the queue is empty, finished slots
leave the inference batch (active-episode compaction) and a group whose slots are all idle is no
longer stepped. An episode's outcome depends only on its individual and its seed, never on the
slot that ran it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from nevo import machine
from nevo.evaluation.episodes import Episodes, Results
from nevo.evaluation.experiences import sample_for
from nevo.evaluation.slot_weights import in_parts, mutation_s
from nevo.machine import cores
from nevo.tasks.atari_ram import RamReplayer, collect
from nevo.tasks.envs import NOOP, make_atari, noop_count

# What receive() finds a group to be after its step.
LIVE, RESETTING, IDLE = range(3)


# From this many slots on, starting the emulators takes long enough to say so: ale-py builds a vector
# env's emulators one after another, holding the GIL (0.11-0.13 s each on a 16-core GPU machine, so
# about a minute for the GPU layout's 512; docs/performance.md).
SAY_START_SLOTS = 128

# The emulators' C++ threads and the reset threads run this much nicer than the thread that drives
# them. speed: the driving thread (the forward's calls, sends, receives, bookkeeping) is the
# pipeline's one serial path, and where emulator threads outnumber the cores it waited for a
# slice behind them. A GPU run's generation is bound by it (a policy call ~80 us a row in a 16-core
# H200 generation against ~11 in bench_forward); with a stand-in GPU policy of that shape on 2
# cores (1 ms of Python, then 1 ms waiting) the overlap pipeline ran 1.21x faster with each call
# waited for, 1.08x with steps submitted and collected later; the CPU's lockstep generation is
# unchanged (experiments.bench_driver; docs/performance.md, session 21).
EMULATOR_NICE = 10


def reset_batch_of(group: int) -> int:
    """Ended slots of a group that wait to start their new episodes in one seeded reset.

    speed: a seeded reset reloads the ROM (~0.1-0.2 s) and stops its whole group meanwhile (ALE's
    vector env steps all of its emulators or none); resetting a group's ended slots together
    stops it once for several. Groups of up to 15 (the CPU's groups of 1) reset each slot at
    once, as before; a 16-core GPU box's default groups of 128 wait for 16 (session 20's run with
    --slots 256: groups of 64, 8). The episodes are the same either way: each starts from its own
    seeded reset, whenever that is."""
    return max(1, group // 8)


def layout(device: str, cores: int, population: int, run_cfg) -> tuple[int, int, bool]:
    """(slots, group size, overlap) from the settings, 0s and "auto" chosen from the machine.

    overlap where the forward runs on a GPU: four groups, so three step while one's forward
    runs. On the CPU the forward and the emulators share the cores, and running each on all
    cores in turn (lockstep) is faster; there each emulator is a group of its own, so that an
    emulator whose episode has ended stops stepping at once (ALE's vector env steps all of its
    emulators or none) and its seeded reset holds up no other slot: 1.16-1.21x frames/s over
    groups of 8 on a GA's first generation, 2 cores (both measured in docs/performance.md).
    Beyond 32 slots the groups grow so that there are at most 32 (the Python work per step
    grows with the groups; not measured on a big CPU-only machine). Slots: 16 per core on the
    CPU, 32 per core with a GPU.
    """
    overlap = run_cfg.pipeline == "overlap" or (run_cfg.pipeline == "auto" and device == "cuda")
    slots = run_cfg.env_slots or min(population, (32 if device == "cuda" else 16) * cores)
    group = run_cfg.emulators_per_group or (-(-slots // 4) if overlap else -(-slots // 32))
    return slots, max(1, min(slots, group)), overlap


class AtariEvaluator:
    """Runs Episodes on groups of Atari emulators, `policy` choosing the actions.

    slots: emulators in all; group_size: emulators per vector env (0: two groups); overlap:
    True drives the groups round robin, one group's forward running while the others step;
    False runs in lockstep, one forward over every live group, then all of them step (with one
    group of all slots, that is the foundation's plain loop). See `layout` for the defaults.
    reset_batch: a group's slots whose episodes ended wait, idle, until this many of them can
    start new episodes in one seeded reset (fewer when fewer episodes are left or when none of
    the group's slots is still playing; 0: reset_batch_of the group size); 1 resets each at once.
    """

    def __init__(
        self,
        env_cfg,
        policy,
        weights,
        slots: int,
        threads: int,
        group_size: int = 0,
        overlap: bool = True,
        ram=False,
        reset_batch: int = 0,
    ):
        self.env_cfg = env_cfg
        # nevo.nets.kernels.make_policy(...): load(weights), (rows_ind, obs, take) -> actions
        self.policy = policy
        self.weights = weights  # nevo.evaluation.slot_weights: the rows the policy reads, built from genomes
        self.overlap = overlap
        self.group = max(1, min(slots, group_size or -(-slots // 2)))
        n_groups = -(-slots // self.group)
        self.slots = n_groups * self.group
        self.threads = min(threads, self.group)  # C++ threads per vector env: more would only sleep
        self.reset_batch = max(1, reset_batch or reset_batch_of(self.group))
        if self.slots >= SAY_START_SLOTS:
            print(
                f"starting {self.slots} Atari emulators (ale-py loads each one's ROM in turn, ~0.1 s each)",
                file=sys.stderr,
                flush=True,
            )
        nice = EMULATOR_NICE  # (read once: the reset threads start later)
        before = machine.native_threads()
        self.envs = [make_atari(env_cfg, self.group, self.threads) for _ in range(n_groups)]
        # ale-py starts each vector env's C++ worker threads as it builds it: the native threads
        # that appeared meanwhile (ale-py does not name them), less any Python thread started by
        # other code meanwhile (a Dask worker's, say)
        python = {t.native_id for t in threading.enumerate()}
        machine.lower_priority(machine.native_threads() - before - python, nice)
        self.resetter = ThreadPoolExecutor(
            max_workers=min(n_groups, cores()),
            thread_name_prefix="reset",
            initializer=lambda: machine.lower_priority([threading.get_native_id()], nice),
        )
        # group -> Future of its seeded reset, made when the group went idle at the end of a run
        # (its slots' episodes ended and the queue was empty): the next run starts from it.
        # speed: the ~0.1 s ROM reloads then run in a run's straggler tail, where the cores have
        # room, not at the next run's start, where nothing else can (docs/performance.md).
        self.fresh: dict = {}
        # ram: each episode's final RAM is its behaviour (Results.behaviours), found by replaying
        # its actions in worker processes (nevo.tasks.atari_ram).
        self.replayer = RamReplayer(env_cfg.game, env_cfg.frameskip, cores()) if ram else None

    def reset_group(self, g: int):
        """Future of group g's seeded reset (all its slots), run in a reset thread.

        A fixed reset seed: an unseeded reset draws a random one, and ALE's reset then differs
        from a fresh emulator's (sticky actions are off and no-ops are nevo's, so the seed
        changes nothing else). A seeded reset reloads the ROM: ~0.1 s per emulator.
        """
        return self.resetter.submit(self.envs[g].reset, seed=np.zeros(self.group, np.int64))

    def close(self) -> None:
        self.resetter.shutdown()
        if self.replayer is not None:
            self.replayer.close()
        for env in self.envs:
            env.close()

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames).
        population: nevo.evaluation.episodes.Population, whose rows episodes.ind name."""

        def run_part(pop, eps):
            return self._run(pop, eps, progress)

        return in_parts(run_part, population, episodes, self.weights.max_rows)

    def _run(self, population, episodes: Episodes, progress) -> Results:
        batch = _RunState(self, episodes)
        if batch.n_ep == 0:
            return batch.results()
        self.policy.load(self.weights.start(population, batch.ind, self.slots))
        try:
            if self.overlap:
                self._pipelined(batch, progress)
            else:
                self._lockstep(batch, progress)
        except BaseException:
            for f in batch.replays:  # replays not yet started are not wanted any more
                if f is not None:
                    f.cancel()
            raise
        finally:
            try:
                batch.drain()  # on an error or Ctrl-C, no step is left in flight in the C++ threads
            finally:
                self.policy.release()  # (a GPU step left in flight too)
        return batch.results()

    def _pipelined(self, batch: _RunState, progress) -> None:
        """Round robin: receive group g, choose and send its actions, go on to the next group;
        g's emulators step while the other groups' forward passes run.

        With a policy that submits a step and collects its actions later (CudaPolicy), group g's
        actions are collected and sent after the next group is received and its step submitted:
        the GPU runs g's forward while this thread works. speed: a GPU generation's driving thread
        spent most of its time in policy calls (docs/performance.md, session 20)."""
        pending = deque(batch.start())
        for g in pending:
            batch.act([g])
        held = None  # (group, choice): its step submitted, its actions not yet collected and sent

        def send_held():
            nonlocal held
            if held is not None:
                batch.send(held[1])
                pending.append(held[0])
                held = None

        def go(g):  # group g's actions chosen and sent (or its step submitted, the held group's sent)
            nonlocal held
            if not batch.submits:
                batch.act([g])
                pending.append(g)
                return
            choice = batch.choose([g])
            send_held()
            held = (g, choice)

        while pending or batch.resets or held is not None:
            if pending:
                g = pending.popleft()
                if batch.receive(g) == LIVE:
                    go(g)
                else:  # g is resetting or idle: the held group's actions now
                    send_held()
            else:  # nothing else to receive: the held group's actions now
                send_held()
            for g in batch.finished_resets(block=not pending and held is None):
                go(g)
            batch.report(progress)

    def _lockstep(self, batch: _RunState, progress) -> None:
        """One forward pass over every live group's slots, then those groups step at once.

        speed: where the forward and the emulators share the same few cores (the CPU backend),
        running each on all cores in turn beats overlapping them (measured: docs/performance.md).
        """
        live = batch.start()
        while live or batch.resets:
            if live:
                batch.act(live)
                live = [g for g in live if batch.receive(g) == LIVE]
            live += batch.finished_resets(block=not live)
            batch.report(progress)


class _RunState:
    """The state of one run(): which episode each slot plays, and the per-episode results.

    Slot s = group g * G + k. A slot is live while slot_ep[s] >= 0.
    """

    def __init__(self, ev: AtariEvaluator, episodes: Episodes):
        self.ev, self.G, S = ev, ev.group, ev.slots
        self.submits = hasattr(ev.policy, "submit")  # a step submitted, its actions collected later
        self.n_ep = len(episodes.ind)
        self.ind = np.asarray(episodes.ind, np.int64)
        self.noops = np.array([noop_count(s, ev.env_cfg.noop_max) for s in episodes.seeds], np.int64)
        self.returns = np.zeros(self.n_ep, np.float64)
        self.lengths = np.zeros(self.n_ep, np.int64)
        self.frames = np.zeros(self.n_ep, np.int64)
        self.slot_ep = np.full(S, -1, np.int64)
        self.slot_row = np.zeros(S, np.int64)  # the policy's weight row of each live slot
        self.slot_steps = np.zeros(S, np.int64)
        self.slot_ret = np.zeros(S, np.float64)
        # ALE's cumulative and per-episode frame counters when the slot's episode started.
        self.start_total = np.zeros(S, np.int64)
        self.start_episode = np.zeros(S, np.int64)
        self.obs = np.zeros((S, *ev.envs[0].single_observation_space.shape), np.uint8)  # (S, 4, 84, 84)
        self.actions = np.zeros(S, np.int64)
        # With Episodes.record: a seeded sample of each episode's observations (nevo.evaluation.experiences).
        self.sample = sample_for(episodes, self.obs.shape[1:], np.uint8)
        self.mutation_s0 = mutation_s(ev.weights)
        # With RAM behaviours: each slot's actions so far in its episode (S, steps), and the
        # replay of each ended episode.
        self.record = None if ev.replayer is None else np.zeros((S, 64), np.uint8)
        self.replays: list = [None] * self.n_ep
        self.next_ep = 0
        self.in_flight: set[int] = set()  # groups whose step was sent and not yet received
        self.resets: dict = {}  # group -> (Future of its seeded reset, the slots it resets)
        # group -> its slots (k) whose episodes ended while the queue had more: idle until the
        # group's next seeded reset starts their new episodes (AtariEvaluator's reset_batch)
        self.waiting: dict[int, list[int]] = {}
        self.done = 0
        self.frames_done = 0
        # Straggler tail: wall time with the queue empty and fewer live episodes than slots.
        self.t0 = time.monotonic()
        self.t_last = self.t0
        self.tail_s = 0.0
        self.forward_s = 0.0  # wall time in the policy: with the tail, where a generation's time went
        self.last_report = self.t0

    def start(self) -> list[int]:
        """Reset the groups that get episodes and give each slot its first episode."""
        G = self.G
        first = min(self.ev.slots, self.n_ep)
        self.slot_ep[:first] = np.arange(first)
        self.slot_row[:first] = self.ev.weights.take(self.ind[:first])
        self.next_ep = first
        used = list(range(-(-first // G)))
        # The groups reset at the last run's end where they could, the others now, at once in
        # the reset threads.
        futures = [self.ev.fresh.pop(g, None) or self.ev.reset_group(g) for g in used]
        wait(futures)  # all of them, even if one failed, before any error goes up
        for g, future in zip(used, futures):
            o, info = future.result()
            sl = slice(g * G, (g + 1) * G)
            self.obs[sl] = o
            self.start_total[sl], self.start_episode[sl] = info["frame_number"], info["episode_frame_number"]
        return used

    def act(self, groups: list[int]) -> None:
        """Choose these groups' actions in one forward pass (the net for live slots past their
        no-ops, NOOP elsewhere) and send them; the groups' emulators start stepping."""
        self.send(self.choose(groups))

    def choose(self, groups: list[int]) -> tuple:
        """Start choosing these groups' actions: the policy's step for their acting slots, submitted
        where the policy can (its actions collected by send), else run here."""
        G = self.G
        slots = (np.asarray(groups)[:, None] * G + np.arange(G)).ravel()
        ep = self.slot_ep[slots]
        acting = slots[(ep >= 0) & (self.slot_steps[slots] >= self.noops[np.maximum(ep, 0)])]
        self.actions[slots] = NOOP
        step = None
        if acting.size:  # compaction: only these rows go through the net
            if self.sample is not None:  # the observations the net acts on
                self.sample.offer(self.slot_ep[acting], self.obs[acting])
            t0 = time.monotonic()
            # the policy gathers the acting slots' frames itself (on a GPU, straight into the
            # page-locked buffer it uploads from)
            policy = self.ev.policy
            call = policy.submit if self.submits else policy
            step = call(self.slot_row[acting], self.obs, take=acting)
            self.forward_s += time.monotonic() - t0
        return groups, slots[ep >= 0], acting, step

    def send(self, choice: tuple) -> None:
        """Collect a choice's actions (a submitted step's) and send them: the groups step."""
        groups, live, acting, step = choice
        G = self.G
        if acting.size:
            if self.submits:
                t0 = time.monotonic()
                step = self.ev.policy.collect(step)
                self.forward_s += time.monotonic() - t0
            self.actions[acting] = step
        if self.record is not None:
            self._record(live)
        for g in groups:
            self.ev.envs[g].send(self.actions[g * G : (g + 1) * G])
            self.in_flight.add(g)

    def _record(self, live: np.ndarray) -> None:
        """Append the actions just chosen to these live slots' records (grown as needed)."""
        steps = self.slot_steps[live]
        if steps.size and steps.max() >= self.record.shape[1]:
            self.record = np.concatenate([self.record, np.zeros_like(self.record)], axis=1)
        self.record[live, steps] = self.actions[live]

    def report(self, progress) -> None:
        """Call progress(done, total, frames) at most twice a second."""
        now = time.monotonic()
        if progress is not None and now - self.last_report > 0.5:
            progress(self.done, self.n_ep, self.frames_done)
            self.last_report = now

    def receive(self, g: int) -> int:
        """Collect group g's step; end, record and refill slots. Returns LIVE (ready to act),
        RESETTING (its new episodes' seeded reset is under way) or IDLE (no live episode)."""
        G, env = self.G, self.ev.envs[g]
        sl = slice(g * G, (g + 1) * G)
        o, reward, term, trunc, info = env.recv()
        self.in_flight.discard(g)
        self._clock()
        self.obs[sl] = o
        live = self.slot_ep[sl] >= 0
        self.slot_ret[sl] += np.where(live, reward, 0)
        self.slot_steps[sl] += live
        ended = np.flatnonzero(term | trunc)
        waiting = self.waiting.setdefault(g, [])
        for k in ended:
            s = g * G + k
            e = self.slot_ep[s]
            if e < 0:
                continue
            # The env auto-reset this slot in the same step: its counters now belong to a new
            # episode that has episode_frame_number frames of its own so far.
            total, fresh = int(info["frame_number"][k]), int(info["episode_frame_number"][k])
            self.frames[e] = total - fresh - self.start_total[s] + self.start_episode[s]
            self.returns[e], self.lengths[e] = self.slot_ret[s], self.slot_steps[s]
            self.frames_done += int(self.frames[e])
            if self.record is not None:
                self.replays[e] = self.ev.replayer.submit(self.record[s, : self.slot_steps[s]].copy())
            self.done += 1
            self.ev.weights.done(self.ind[e])
            self.slot_ret[s], self.slot_steps[s] = 0.0, 0
            self.slot_ep[s] = -1
            waiting.append(int(k))
        live = (self.slot_ep[sl] >= 0).any()
        left = self.n_ep - self.next_ep  # episodes not yet given a slot
        del waiting[left:]  # no episode left for these: they stay idle
        if waiting and (len(waiting) >= min(self.ev.reset_batch, left) or not live):
            # The waiting slots take the next episodes, in slot order. ALE's auto-reset draws its
            # own seed, and some games' starts then depend on what ran in the slot before (seen
            # on Frostbite); a seeded reset does not. It reloads the ROM (~0.1 s), so it runs in
            # a reset thread (ALE frees the GIL) while the other groups go on; this group waits
            # for it.
            fresh_slots = np.array(sorted(waiting), np.int64)
            waiting.clear()
            eps = np.arange(self.next_ep, self.next_ep + fresh_slots.size)
            self.next_ep += fresh_slots.size
            self.slot_ep[g * G + fresh_slots] = eps
            self.slot_row[g * G + fresh_slots] = self.ev.weights.take(self.ind[eps])
            mask = np.zeros(G, bool)
            mask[fresh_slots] = True
            seeds = np.zeros(fresh_slots.size, np.int64)
            future = self.ev.resetter.submit(env.reset, seed=seeds, options={"reset_mask": mask})
            self.resets[g] = (future, g * G + fresh_slots)
            return RESETTING
        if live:
            return LIVE
        self.ev.fresh[g] = self.ev.reset_group(g)  # ready for the next run's first episodes
        return IDLE

    def finished_resets(self, block: bool) -> list[int]:
        """Groups whose seeded reset is done (waiting for one if block), ready to act again."""
        if not self.resets:
            return []
        if block:
            wait([f for f, _ in self.resets.values()], return_when=FIRST_COMPLETED)
        ready = []
        for g, (future, slots) in list(self.resets.items()):
            if future.done():
                del self.resets[g]
                o, info = future.result()
                k = slots - g * self.G
                self.obs[slots] = o[k]
                self.start_total[slots] = info["frame_number"][k]
                self.start_episode[slots] = info["episode_frame_number"][k]
                ready.append(g)
        return ready

    def drain(self) -> None:
        """Receive every step and reset still in flight (their results are discarded)."""
        wait([f for f, _ in self.resets.values()])
        self.resets.clear()
        for g in list(self.in_flight):
            self.ev.envs[g].recv()
        self.in_flight.clear()

    def _clock(self) -> None:
        now = time.monotonic()
        # (slots waiting for their group's next seeded reset are idle too, but not a tail)
        if self.next_ep >= self.n_ep and (self.slot_ep >= 0).sum() < self.ev.slots:
            self.tail_s += now - self.t_last
        self.t_last = now

    def results(self) -> Results:
        """The outcomes, once every replay is in (their time counts in the wall time)."""
        bc = None if self.record is None else collect(self.replays, self.returns, self.frames)
        wall = time.monotonic() - self.t0
        return Results(
            self.returns,
            self.lengths,
            self.frames,
            wall_s=wall,
            tail_s=self.tail_s,
            forward_s=self.forward_s,
            behaviours=bc,
            experiences=None if self.sample is None else self.sample.obs,
            experience_counts=None if self.sample is None else self.sample.counts(),
            mutation_s=mutation_s(self.ev.weights) - self.mutation_s0,
        )
