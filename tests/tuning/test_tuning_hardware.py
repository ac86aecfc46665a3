"""Hardware profiles: the shipped Ascend table, user files, lookup by name."""
import json
from pathlib import Path

import pytest

from sgemm_cube.tuning import hardware as H

ASCEND_JSON = Path(H.__file__).with_name("profiles") / "ascend.json"

# Buffer sizes from the public AscendC platform descriptions (shared/notes/ascend.md).
KIB = 1024
EXPECTED = {
    "910a": dict(ai_cores=32, clock_ghz=1.0, l1_bytes=1024 * KIB, l0a_bytes=64 * KIB, l0b_bytes=64 * KIB,
                 l0c_bytes=256 * KIB, ub_bytes=256 * KIB, cube_fp16_tflops=256.0, hbm_gbps=1200.0),
    "910b": dict(ai_cores=20, clock_ghz=1.8, l1_bytes=512 * KIB, l0a_bytes=64 * KIB, l0b_bytes=64 * KIB,
                 l0c_bytes=128 * KIB, ub_bytes=192 * KIB, hbm_gbps=1600.0),
}


@pytest.fixture(autouse=True)
def _no_user_profiles(monkeypatch):
    monkeypatch.delenv("SGEMM_CUBE_PROFILES", raising=False)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_shipped_profiles_hold_the_documented_numbers(key):
    p = H.get_profile(key)
    for field, value in EXPECTED[key].items():
        assert getattr(p, field) == value, field


def test_shipped_file_keeps_the_simple_schema():
    # The AscendC arch header is checked against these flat keys: keep them stable.
    data = json.loads(ASCEND_JSON.read_text())
    assert data["schema"] == 1 and set(data["profiles"]) == {"910a", "910b"}
    for entry in data["profiles"].values():
        for field in ("name", "ai_cores", "clock_ghz", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes",
                      "ub_bytes", "cube_fp16_tflops", "hbm_gbps"):
            assert field in entry


def test_910b_fp16_peak_is_four_times_its_fp32_peak():
    # 20 cores x 16^3 MACs x 2 x 1.8 GHz; the paper quotes 73.73 TFLOP/s native FP32 on 910B3.
    p = H.get_profile("910b")
    assert p.cube_fp16_tflops == pytest.approx(20 * 16**3 * 2 * 1.8e9 / 1e12, rel=1e-3)
    assert p.cube_fp16_tflops == pytest.approx(4 * p.cube_fp32_tflops, rel=1e-3)


@pytest.mark.parametrize("name", ["910a", "910A", "Ascend 910A", "ascend910a", "Ascend-910a"])
def test_lookup_ignores_case_and_separators(name):
    assert H.get_profile(name).key == "910a"


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(KeyError, match="910a"):
        H.get_profile("tpu-v9")


def test_profile_round_trips_through_json():
    p = H.get_profile("910a")
    again = H.parse_profiles({"schema": 1, "profiles": {"910a": p.to_json()}})["910a"]
    assert again == p


USER_TOML = """
schema = 1
[profiles.mychip]
name = "My Chip"
ai_cores = 8
clock_ghz = 1.5
l1_bytes = 524288
l0a_bytes = 65536
l0b_bytes = 65536
l0c_bytes = 131072
ub_bytes = 196608
cube_fp16_tflops = 100.0
hbm_gbps = 800.0
"""


def test_user_profile_from_toml_via_environment(tmp_path, monkeypatch):
    path = tmp_path / "chips.toml"
    path.write_text(USER_TOML)
    monkeypatch.setenv("SGEMM_CUBE_PROFILES", str(path))
    p = H.get_profile("my chip")
    assert (p.key, p.ai_cores, p.blocking) == ("mychip", 8, H.Blocking())
    assert "910a" in H.list_profiles()  # built-ins stay


def test_user_json_overrides_a_builtin(tmp_path):
    entry = H.get_profile("910a").to_json()
    entry["ai_cores"] = 30
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema": 1, "profiles": {"910a": entry}}))
    assert H.get_profile("910a", extra=H.load_profiles(path)).ai_cores == 30
    assert H.get_profile("910a").ai_cores == 32


@pytest.mark.parametrize("mutate, message", [
    (lambda e: e.pop("l1_bytes"), "missing"),
    (lambda e: e.update(l1_bytes=-1), "positive integer"),
    (lambda e: e.update(l1_bytes=True), "positive integer"),
    (lambda e: e.update(hbm_gbps="fast"), "positive number"),
    (lambda e: e.update(colour="red"), "unknown field"),
    (lambda e: e.update(c_path=["l2"]), "c_path"),
    (lambda e: e["blocking"].update(c_reserved_bytes=10**9), "no room"),
    (lambda e: e["blocking"].update(warp=1), "unknown blocking"),
])
def test_invalid_profiles_are_rejected(mutate, message):
    entry = H.get_profile("910a").to_json()
    mutate(entry)
    with pytest.raises(H.ProfileError, match=message):
        H.parse_profiles({"schema": 1, "profiles": {"x": entry}})


@pytest.mark.parametrize("text", ["{not json", '{"schema": 2, "profiles": {}}', "[]"])
def test_unreadable_profile_files_raise_profile_error(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(H.ProfileError):
        H.load_profiles(path)


def test_cuda_profile_needs_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        prof = H.cuda_profile()
        assert prof["sm_count"] > 0 and prof["name"]
    else:
        with pytest.raises(RuntimeError, match="no CUDA device"):
            H.cuda_profile()
