"""The stored cases read as columns in chunks equal the cases read record by record."""

from dataclasses import replace

import numpy as np
from conftest import MONTESANO_CONFIG, sampled_records

from affordance_ros.core import AffordanceNetwork
from affordance_ros.data import training_cases
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.training_cases import stored_cases
from affordance_ros.data.trial import case_set


def test_column_chunks_equal_records_and_unusable_cases_are_skipped(tmp_path, monkeypatch):
    records = sampled_records(230)
    records[5] = replace(records[5], action="jump")                # an action the config does not have
    records[17] = replace(records[17], object_features={**records[17].object_features,
                                                        "thermometer": 3.0})  # a sensor the config does not have
    records[40] = replace(records[40], object_features={s: x for s, x in records[40].object_features.items()
                                                        if s != "color"})  # a reading missing: fine
    with CaseStore(tmp_path / "cases.db") as store:
        for record in records:
            store.add(record)
        chunks = list(store.column_chunks(after=3, chunk_size=50))
        numbered = store.numbered_records(after=3)
    assert [len(c.ids) for c in chunks] == [50, 50, 50, 50, 27]
    assert [i for c in chunks for i in c.ids.tolist()] == [i for i, _ in numbered]
    flat = {s: np.concatenate([c.readings.get(s, np.full(len(c.ids), np.nan)) for c in chunks])
            for s in ("color", "obj_vel", "thermometer")}
    for k, (_, record) in enumerate(numbered):
        for sensor, column in flat.items():
            value = record.readings.get(sensor)
            assert (np.isnan(column[k]) if value is None else column[k] == value)

    monkeypatch.setattr(training_cases, "LEARN_CHUNK", 64)
    config = AffordanceNetwork.load(MONTESANO_CONFIG)
    with CaseStore(tmp_path / "cases.db", read_only=True) as store:
        cases, skipped, marker = stored_cases(store, config, after=3)
    usable = [r for _, r in numbered if r.trial_id not in (records[5].trial_id, records[17].trial_id)]
    expected = case_set(config, usable)
    assert len(skipped) == 2 and cases.n_cases == len(usable) == marker["count"]
    assert marker["last_id"] == 230 and marker["last_trial_id"] == records[-1].trial_id
    assert list(cases.trial_ids) == list(expected.trial_ids)
    np.testing.assert_array_equal(cases.labels["Action"], expected.labels["Action"])
    assert set(cases.readings) == set(expected.readings)
    for sensor, x in expected.readings.items():
        np.testing.assert_array_equal(cases.readings[sensor], x)
