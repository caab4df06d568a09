"""The written contracts hold: every algorithm is an Algorithm and every evaluator an Evaluator
(nevo.algos.contract, nevo.episodes), with the same argument names everywhere."""

import inspect
import os
import re

import numpy as np
import pytest

from nevo import config
from nevo.algos import NAMES, NOVELTY, OWN, REGISTRY, bases_of, declaration, make_algo
from nevo.algos.contract import Algorithm
from nevo.atari.evaluator import AtariEvaluator
from nevo.cluster.evaluator import ClusterEvaluator
from nevo.episodes import Evaluator
from nevo.evaluation.in_process import InProcessEvaluator
from nevo.evaluation.supervised import SupervisedEvaluator
from tests.helpers import BEHAVIOUR, tiny_config


@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_meets_the_algorithm_contract(name, source):
    algo = make_algo(name, tiny_config(name), source, BEHAVIOUR)
    assert isinstance(algo, Algorithm)
    assert list(inspect.signature(algo.tell).parameters) == ["results", "fitness"]
    assert inspect.signature(algo.tell).parameters["fitness"].default is None
    assert algo.generation == 0 and isinstance(algo.validation_episodes, int)
    assert np.isnan(algo.elite_score) and algo.best_elite is None
    d = declaration(name)
    assert name in d.names and d.step is None  # the population step: ask, evaluate, tell
    meta = name in ("ns-es", "nsr-es", "nsra-es")  # the NS-ES family: a meta-population of ES agents
    assert algo.agent_count == (tiny_config(name).settings.meta_population if meta else 1)
    assert 0 <= algo.elite_agent < algo.agent_count and bases_of(tiny_config(name)) >= 1


def test_the_declarations_are_the_settings_names():
    """Every algorithm the settings accept is declared once, by its own module, and the ones that
    declare a behaviour are the novelty ones."""
    assert OWN == ("ga", "rs", "es", "ga-ns", "ns-es", "nsr-es", "nsra-es", "sgd")
    assert NOVELTY == ("ga-ns", "ns-es", "nsr-es", "nsra-es") and NAMES == OWN[:-1]
    for name in OWN:  # each its own section, whose dataclass is in its own module
        d = REGISTRY[name]
        assert (
            d.settings.__module__ == d.make.__module__ and config.Config(algo=name).settings == d.settings()
        )
    with pytest.raises(ValueError, match="--algo: got 'cma', allowed: ga, rs, es"):
        declaration("cma")


# An algorithm's name compared, a family of names, or an algorithm's class asked (reading the name
# to print it or to name a run folder is fine).
NAME_SWITCHES = re.compile(
    r"\.algo\s*(==|!=|\bin\b|\bnot in\b)|NS_ALGOS|NS_ES_FAMILY|FAMILIES|family_section|SCRIPTS"
    r"|isinstance\([^)]*\b(GA|ES|GANS|NSES|SGD)\b"
)


def test_the_loop_and_the_evaluators_know_no_algorithm_by_name():
    """Under nevo/loops, nevo/runs, the evaluators (nevo/evaluation, nevo/atari, nevo/cluster) and
    their toolkit (nevo/episodes) nothing switches on an algorithm's name: they ask its declaration
    (nevo.algos.declaration) or the contract."""
    root = os.path.join(os.path.dirname(__file__), "..", "nevo")
    found = []
    for sub in ("loops", "runs", "evaluation", "atari", "cluster", "episodes"):
        for f in sorted(os.listdir(os.path.join(root, sub))):
            if f.endswith(".py"):
                for n, line in enumerate(open(os.path.join(root, sub, f)), 1):
                    if NAME_SWITCHES.search(line.split("#")[0]):
                        found.append(f"nevo/{sub}/{f}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("cls", [AtariEvaluator, InProcessEvaluator, ClusterEvaluator, SupervisedEvaluator])
def test_every_evaluator_meets_the_evaluator_contract(cls):
    assert issubclass(cls, Evaluator)
    params = inspect.signature(cls.run).parameters
    assert (
        list(params) == ["self", "population", "episodes", "progress"] and params["progress"].default is None
    )


def test_a_runs_extensions_come_from_its_declaration_and_settings():
    """A run has the extensions its algorithm's declaration lists that its settings want (each an
    Extension): none for a plain GA; the experiences for a safe mutation (GA, GA-NS); the
    statistics for ES and the ES family with --obs-norm 1; the gradient correlation for ES with
    --grad-corr 1. The loop names none of them."""
    from nevo.algos import extensions_of
    from nevo.algos.contract import Extension

    def has(cfg):
        found = extensions_of(cfg)
        assert all(issubclass(e, Extension) for e in found)
        return [e.__name__ for e in found]

    assert has(config.Config(algo="ga")) == [] == has(config.Config(algo="es"))
    assert has(config.Config(algo="ga", settings=config.GAConfig(mutation="sm-g-sum"))) == ["Experiences"]
    assert has(config.Config(algo="ga-ns", settings=config.GANSConfig(mutation="sm-g-sum"))) == [
        "Experiences"
    ]
    assert has(config.Config(algo="es", settings=config.ESConfig(obs_norm=1))) == ["ObservationStatistics"]
    assert has(config.Config(algo="nsr-es", settings=config.NSESConfig(obs_norm=1))) == [
        "ObservationStatistics"
    ]
    assert has(config.Config(algo="es", settings=config.ESConfig(grad_corr=1))) == ["GradientCorrelation"]
    loop = open(
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nevo/loops/loop.py")
    )
    assert not re.search(r"Experiences|ObservationStatistics|GradientCorrelation|EXTENSIONS", loop.read())


PIPELINE_SWITCHES = re.compile(r"\b(pipeline|pipe)\s*(==|!=)|(==|!=)\s*\"(overlap|lockstep|workers)\"")


def test_no_code_outside_a_pipeline_tests_a_pipelines_name():
    """A pipeline says what is its own (nevo.atari.evaluator.PIPELINES: its layout, what its
    pool needs, whether this process steps the emulators, its figures): nothing in nevo/ compares a
    pipeline's name."""
    root = os.path.join(os.path.dirname(__file__), "..", "nevo")
    found = []
    for folder, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                for n, line in enumerate(open(path), 1):
                    if PIPELINE_SWITCHES.search(line.split("#")[0]):
                        found.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
    assert PIPELINE_SWITCHES.search('if pipe == "workers":') and PIPELINE_SWITCHES.search('x != "lockstep"')
