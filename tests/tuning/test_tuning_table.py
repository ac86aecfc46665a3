"""Tuning tables: round trip, atomic writes, lookup, corrupt and foreign files."""
import json
import os
import warnings

import pytest

from sgemm_cube.backends import npu_schedule as ns

from sgemm_cube.tuning import choose_tiling, model
from sgemm_cube.tuning import table as T

DEVICE = "Test GPU 9000 (pytest)"
CFG = {"variant": "ptr", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
       "num_stages": 3, "split_block": [64, 64], "split_warps": 4, "flush_k": 128}


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    d = tmp_path / "tables"
    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(d))
    return d


def _table(**configs):
    t = T.TuningTable(DEVICE, "cuda", environment={"torch": "x"})
    t.set((4096, 4096, 4096), CFG, {"ms": 1.0, "tflops": 137.4, "rel_error": 2e-7})
    t.set((1024, 1024, 1024), dict(CFG, BLOCK_M=64, **configs), {"ms": 0.05})
    return t


@pytest.mark.parametrize("m,n,k,expected", [
    (4096, 4096, 4096, (4096, 4096, 4096)), (4097, 1, 3000, (8192, 16, 4096)), (0, 16, 17, (16, 16, 32)),
    (1 << 30, 5, 5, (1 << 24, 16, 16)),
])
def test_bucket_rounds_up_to_powers_of_two(m, n, k, expected):
    assert T.bucket(m, n, k) == expected


def test_round_trip(user_dir):
    t = _table()
    path = T.save(t)
    assert path.parent == user_dir and path.name == "test_gpu_9000_pytest.json"
    again = T.load(path)
    assert again.to_json() == json.loads(path.read_text())
    assert (again.device, again.backend, again.entries) == (t.device, t.backend, t.entries)
    assert T.lookup(DEVICE, 4000, 4000, 4000) == CFG
    assert T.lookup(DEVICE, 1000, 1000, 1000)["BLOCK_M"] == 64


def test_nearest_bucket_when_no_exact_match():
    t = _table()
    assert t.lookup(2048, 2048, 2048, exact=True) is None
    assert t.lookup(3000, 3000, 3000)["BLOCK_M"] == 128  # 4096 bucket is nearer than 1024
    assert t.lookup(600, 600, 600)["BLOCK_M"] == 64


def test_lookup_returns_a_copy():
    T.save(_table())
    T.lookup(DEVICE, 4096, 4096, 4096)["BLOCK_M"] = 16
    assert T.lookup(DEVICE, 4096, 4096, 4096)["BLOCK_M"] == 128


def test_missing_table_gives_none_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert T.lookup("No Such Device", 64, 64, 64) is None


def test_write_is_atomic(user_dir, monkeypatch):
    path = T.save(_table())
    before = path.read_bytes()

    def broken_dump(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(T.json, "dump", broken_dump)
    with pytest.raises(OSError, match="disk full"):
        T.save(_table())
    assert path.read_bytes() == before
    assert sorted(os.listdir(user_dir)) == [path.name]  # no temporary file left behind


def test_invalid_table_is_not_saved(user_dir):
    t = _table()
    t.entries[0].config["BLOCK_M"] = 100
    with pytest.raises(T.TableError):
        T.save(t)
    assert not user_dir.exists() or not list(user_dir.iterdir())


def test_saved_table_replaces_cached_one():
    T.save(_table())
    assert T.lookup(DEVICE, 4096, 4096, 4096)["num_warps"] == 8
    t = _table()
    t.set((4096, 4096, 4096), dict(CFG, num_warps=4))
    T.save(t)
    assert T.lookup(DEVICE, 4096, 4096, 4096)["num_warps"] == 4


def _corrupt_variants():
    good = _table().to_json()
    yield "truncated", json.dumps(good)[:-20]
    yield "not json", "\x00\x01garbage"
    yield "a list", "[1, 2, 3]"
    yield "other kind", json.dumps(dict(good, kind="something.else"))
    yield "newer schema", json.dumps(dict(good, schema=2))
    yield "other device", json.dumps(dict(good, device="Another GPU"))
    yield "other backend", json.dumps(dict(good, backend="ascend"))
    yield "unknown backend", json.dumps(dict(good, backend="rocm"))
    bad = json.loads(json.dumps(good))
    bad["entries"][0]["config"]["BLOCK_M"] = 96
    yield "non power-of-two tile", json.dumps(bad)
    bad = json.loads(json.dumps(good))
    bad["entries"][0]["config"]["num_warps"] = "8"
    yield "string warps", json.dumps(bad)
    bad = json.loads(json.dumps(good))
    bad["entries"][0]["config"]["evil"] = 1
    yield "unknown key", json.dumps(bad)
    bad = json.loads(json.dumps(good))
    bad["entries"][0]["config"]["variant"] = "does_not_exist"
    yield "unknown variant", json.dumps(bad)
    bad = json.loads(json.dumps(good))
    bad["entries"][0]["bucket"] = [4096, 4096]
    yield "short bucket", json.dumps(bad)
    bad = json.loads(json.dumps(good))
    bad["entries"].append(bad["entries"][0])
    yield "duplicate bucket", json.dumps(bad)


@pytest.mark.parametrize("label,text", list(_corrupt_variants()), ids=[v[0] for v in _corrupt_variants()])
def test_corrupt_or_foreign_file_warns_and_gives_defaults(user_dir, label, text):
    user_dir.mkdir(parents=True, exist_ok=True)
    T.table_path(DEVICE, user_dir).write_text(text)
    with pytest.warns(T.TuningTableWarning, match="ignoring tuning table"):
        assert T.lookup(DEVICE, 4096, 4096, 4096, backend="cuda") is None


def test_corrupt_user_table_falls_back_to_the_next_folder(user_dir, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    T.save(_table(), shipped)
    monkeypatch.setattr(T, "_PACKAGE_DIR", shipped)
    user_dir.mkdir(parents=True)
    T.table_path(DEVICE, user_dir).write_text("{")
    with pytest.warns(T.TuningTableWarning):
        assert T.lookup(DEVICE, 4096, 4096, 4096) == CFG


def test_shipped_tables_are_valid():
    for path, table in T.find_tables([T._PACKAGE_DIR]):
        assert not isinstance(table, str), f"{path}: {table}"
        assert T.table_path(table.device, path.parent) == path


def test_format_table_lists_every_bucket():
    text = T.format_table(_table())
    assert DEVICE in text and "4096x4096x4096" in text and "137.4 TFLOP/s" in text


# --- Ascend entries and choose_tiling ------------------------------------------------------------

def test_measured_ascend_entry_drives_choose_tiling():
    t = T.TuningTable("Ascend 910A", "ascend")
    t.set(T.bucket(8192, 8192, 8192), {"bm": 64, "bk": 64, "bn": 128, "n_fused": 20})
    T.save(t)
    # the measured blocks; n_fused makes K groups of K_GROUP = 1024 elements (the two-level accumulation)
    assert tuple(choose_tiling("910a", 8192, 8192, 8192)) == (64, 64, 128, 16, False, 1)
    # n_fused never exceeds the K blocks of the problem
    assert choose_tiling("910a", 8000, 8000, 1000).n_fused == -(-1000 // 64)
    assert tuple(choose_tiling("910a", 8192, 8192, 8192, use_table=False))[:4] != (64, 64, 128, 20)
    # an entry measured in one GEMM mode is not used for the other
    assert tuple(choose_tiling("910a", 8192, 8192, 8192, blocking="kernel-per-term"))[:4] != (64, 64, 128, 20)


def test_measured_per_term_entry_drives_the_backends_choice():
    from sgemm_cube.tuning import pipeline

    t = T.TuningTable("Ascend 910A", "ascend")
    t.set(T.bucket(11264, 11264, 2816), {"bm": 176, "bk": 64, "bn": 176, "n_fused": 44, "per_term": True})
    T.save(t)
    # the measured blocks, in K groups of 1024 (16 blocks of 64: the two-level accumulation)
    assert tuple(choose_tiling("910a", 11264, 11264, 2816, blocking="kernel-per-term")) == (176, 64, 176, 16, True, 1)
    assert tuple(pipeline.best_kernel("910a", 11264, 11264, 2816)[0]) == (176, 64, 176, 16, True, 1)
    with pytest.raises(T.TableError, match="per_term"):
        T.validate_config({"bm": 16, "bk": 16, "bn": 16, "per_term": 1}, "ascend")


def test_infeasible_ascend_entry_is_ignored():
    t = T.TuningTable("Ascend 910B", "ascend")
    t.set(T.bucket(4096, 4096, 4096), {"bm": 512, "bk": 64, "bn": 512})  # 512*512*8 B > L0C
    T.save(t)
    best = model.rank("910b", 4096, 4096, 4096, top=1, blocking=model.kernel_blocking("910b"))[0]
    fitted = ns.fit_tiling(ns.capacity_from_profile("910b"), ns.Tiling(*best[:4]), k=4096, terms=3)
    assert tuple(choose_tiling("910b", 4096, 4096, 4096)) == tuple(fitted)


@pytest.mark.parametrize("config", [{"bm": 100, "bk": 64, "bn": 64}, {"bm": 64, "bk": 64}, {"bm": 64, "bk": 64, "bn": 64,
                                                                                         "n_fused": 0}])
def test_malformed_ascend_configs_are_rejected(config):
    with pytest.raises(T.TableError):
        T.validate_config(config, "ascend")
