"""The written contracts hold: every algorithm is an Algorithm and every evaluator an Evaluator
(nevo.algos.contract, nevo.evaluation.episodes), with the same argument names everywhere."""

import inspect

import numpy as np
import pytest

from nevo.algos import NAMES, make_algo
from nevo.algos.contract import Algorithm
from nevo.evaluation.cluster import ClusterEvaluator
from nevo.evaluation.episodes import Evaluator
from nevo.evaluation.in_process import InProcessEvaluator
from nevo.evaluation.pipeline import AtariEvaluator
from tests.test_algos import BEHAVIOUR, tiny_config


@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_meets_the_algorithm_contract(name, source):
    algo = make_algo(name, tiny_config(name), source, BEHAVIOUR)
    assert isinstance(algo, Algorithm)
    assert list(inspect.signature(algo.tell).parameters) == ["results", "fitness"]
    assert inspect.signature(algo.tell).parameters["fitness"].default is None
    assert algo.generation == 0 and isinstance(algo.validation_episodes, int)
    assert np.isnan(algo.elite_score) and algo.best_elite is None


@pytest.mark.parametrize("cls", [AtariEvaluator, InProcessEvaluator, ClusterEvaluator])
def test_every_evaluator_meets_the_evaluator_contract(cls):
    assert issubclass(cls, Evaluator)
    params = inspect.signature(cls.run).parameters
    assert (
        list(params) == ["self", "population", "episodes", "progress"] and params["progress"].default is None
    )
