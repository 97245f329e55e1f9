"""EM and MAP assignment in chunks (bounded memory) give exactly what the all-at-once versions give."""

import numpy as np

from affordance_ros.core import (
    CaseEvidence,
    LearningOptions,
    benchmark_network,
    benchmark_structure,
    fit_em,
    sample_cases,
)
from affordance_ros.core import cases as cases_module
from affordance_ros.core.evidence import latent_variables
from affordance_ros.core.inference import JunctionTree, StreamingEStep


def test_streaming_estep_equals_the_precomputed_one():
    truth = benchmark_network("montesano", sigma=2.0, seed=4)
    cases, _ = sample_cases(truth, 3000, np.random.default_rng(0), labelled=("Action",))
    tree = JunctionTree(truth)
    cpts = [v.cpt for v in truth.variables]
    counts, ll = tree.estep(cases.evidence(truth), 512)(cpts)
    stream = StreamingEStep(tree, lambda: cases.evidence_chunks(truth, 700), cases.n_cases, 256)
    s_counts, s_ll = stream(cpts)
    np.testing.assert_allclose(s_ll, ll, rtol=1e-12)
    for a, b in zip(s_counts, counts):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(stream.log_likelihood(cpts), ll, rtol=1e-12)


def test_fit_em_streams_above_the_threshold_with_the_same_result(monkeypatch):
    truth = benchmark_network("montesano", sigma=3.0, seed=2)
    cases, _ = sample_cases(truth, 2000, np.random.default_rng(1), labelled=("Action",))
    structure = benchmark_structure("montesano", 3.0)
    options = LearningOptions(em_acceleration="squarem")
    whole, whole_result = fit_em(structure, cases, options)
    monkeypatch.setattr(cases_module, "STREAM_ENTRIES", 1000)
    monkeypatch.setattr(cases_module, "EVIDENCE_CHUNK", 300)
    assert not CaseEvidence(cases, structure).held
    streamed, streamed_result = fit_em(structure, cases, options)
    assert streamed_result.iterations == whole_result.iterations
    np.testing.assert_allclose(streamed_result.log_posteriors, whole_result.log_posteriors, rtol=1e-10)
    for a, b in zip(streamed.variables, whole.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-9)


def test_map_assignment_in_chunks_and_latent_detection_from_cases(monkeypatch):
    truth = benchmark_network("montesano", sigma=3.0, seed=2)
    cases, _ = sample_cases(truth, 1000, np.random.default_rng(1), labelled=("Action",))
    whole = CaseEvidence(cases, truth).map_values()
    monkeypatch.setattr(cases_module, "STREAM_ENTRIES", 1000)
    monkeypatch.setattr(cases_module, "EVIDENCE_CHUNK", 77)
    chunked = CaseEvidence(cases, truth)
    assert not chunked.held and len(list(chunked.chunks())) == 13
    np.testing.assert_array_equal(chunked.map_values(), whole)
    hidden = cases.take(np.arange(cases.n_cases))   # a copy
    hidden.readings["color"][:] = np.nan
    assert CaseEvidence(hidden, truth).latent == latent_variables(hidden.evidence(truth)) == [truth.index("Color")]
