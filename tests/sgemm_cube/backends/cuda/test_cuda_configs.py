"""The CUDA launch configurations' one schema and validator (sgemm_cube/backends/cuda/configs.py).

The frozen data at the end was derived before the configs moved into
``configs/default.json``, ``h100.json``, ``h200.json`` (a one-off script ran
``launch.resolve_config`` and ``hybrid.native_rule`` for the GPUs, modes and
shapes below with the old tables and in-code fallbacks): the files must keep
choosing exactly that, but for changes made on purpose since, each with its measurement:

* 2026-11-27, ``h100.json``'s ``K <= 2048`` entry (config ``'o'``: 64 x 128 tiles, four warps), which the
  Hopper GPUs without a file of their own (H800, H20) read too: the fp16x3 products from K = 128 to 2048
  ran 1.07-1.7x faster through the public API on an H100 (the entry's ``source`` and ``note``);
* 2026-11-27, ``h100.json``'s ``K <= 2048`` entry for bf16x6 (the same config ``'o'``, against 128 x 64 tiles
  with eight warps): log-normal data on both operands (bf16x6 under ``scheme="auto"``) ran 1.18-1.22x faster
  from K = 1024 to 2048 on an H100, the same bits (its ``source`` and ``note``);
* 2026-11-28, ``h200.json``'s shape buckets ``[8192, 8192, K]`` for K = 128 to 2048 (config ``'p'``: 64 x 128
  tiles, four warps, four stages), which the nearest-bucket rule also gives 4096 x 4096 x 1000 / 1024 and the
  small K of the 1000 / 4096 shapes below, and its ``K <= 2048`` bf16x6 entry (config ``'o'``, as the H100's),
  which an H200 NVL reads too: through the public API on an H200, log-normal data on both operands ran
  0.995 -> 1.25x SGEMM at 8192^2 x 128, 1.14 -> 1.30x at x 512, 1.33 -> 1.59x at x 1024 (bf16x6), normal data
  1.48 -> 1.78x at x 128, the same bits (``benchmarks/results/shortk_configs_h200_20261128-113000.json``);
* 2026-11-29, ``fixup_apart`` (the fix-up in a launch of its own after the tiles') at ``h200.json``'s
  ``[8192, 8192, 128]`` and ``[8192, 8192, 256]`` buckets (config ``'q'``, which the nearest-bucket rule also
  gives K = 1 and 100 of the shapes below) and in a ``K <= 256`` bf16x6 entry (config ``'r'``, which an H200 NVL
  reads too, as the K <= 2048 entry): through the public API on an H200, log-normal data on both operands
  0.957 -> 1.011x SGEMM at 8192 x 64 x 8192, normal data 1.23 -> 1.33x, even at K = 256, the same bits
  (``benchmarks/results/fixup_apart_h200_20261129-150000.json``).
"""
import itertools
import json

import pytest

from sgemm_cube.backends.cuda import configs as C

GPUS = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H800", "NVIDIA H20", "NVIDIA A100-SXM4-80GB",
        "NVIDIA GeForce RTX 4090", "NVIDIA H200 NVL")
CAPABILITIES = ((9, 0), (9, 0), (9, 0), (9, 0), (8, 0), (8, 9), (9, 0))
MODES = (("termwise", "fp16x3"), ("elementwise", "fp16x3"), ("termwise", "fp16x4"), ("elementwise", "bf16x9"),
         ("termwise", "bf16x6"))
SIZES = (1, 100, 1000, 1024, 2048, 2049, 3000, 8192, 20000)
#: (batch, m, n, k), in the order of TODAY's letters.
SHAPES = list(itertools.product((1, 8), (1000, 4096), (100, 4096), SIZES))
SHIPPED = sorted(C.CONFIG_DIR.glob("*.json"))


def test_every_shipped_file_validates():
    assert {p.name for p in SHIPPED} >= {"default.json", "h100.json", "h200.json"}
    for path in SHIPPED:
        doc = C.load(path)
        assert doc["schema"] == C.SCHEMA_VERSION and doc["kind"] == C.KIND, path
        assert doc.get("metadata"), f"{path}: no metadata (commands, versions)"


def test_variant_names_are_the_kernels():
    pytest.importorskip("triton")
    from sgemm_cube.backends.cuda.gemm_tiles import VARIANTS

    assert set(C.VARIANT_NAMES) == set(VARIANTS)


def _doc(**extra):
    doc = {"schema": 2, "kind": C.KIND, "device": "Test GPU",
           "gemm_termwise": [{"config": {"BLOCK_M": 128}}, {"bucket": [64, 64, 64], "config": {"flush_k": 32}}]}
    doc.update(extra)
    return doc


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["gemm_termwise"][0]["config"].update(BLOCK_Q=4), ["gemm_termwise[0]", "BLOCK_Q"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(BLOCK_M=96), ["gemm_termwise[0]", "BLOCK_M=96"]),
    (lambda d: d["gemm_termwise"][1]["config"].update(flush_k=24), ["gemm_termwise[1]", "flush_k=24"]),
    (lambda d: d["gemm_termwise"][1]["config"].update(flush_k=-16), ["gemm_termwise[1]", "flush_k=-16"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(num_warps="8"), ["gemm_termwise[0]", "num_warps='8'"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(split_corr=1), ["gemm_termwise[0]", "split_corr=1"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(variant="wgmma"), ["gemm_termwise[0]", "variant", "wgmma"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(split_block=[64]), ["gemm_termwise[0]", "split_block"]),
    (lambda d: d["gemm_termwise"][0]["config"].update(merge_levels=True), ["gemm_termwise[0]", "merge_levels"]),
    (lambda d: d["gemm_termwise"][0].update(max_k="big"), ["gemm_termwise[0]", "max_k"]),
    (lambda d: d["gemm_termwise"][1].update(bucket=[64, 64]), ["gemm_termwise[1]", "bucket"]),
    (lambda d: d["gemm_termwise"].append(dict(d["gemm_termwise"][1])), ["gemm_termwise[2]", "bucket"]),
    (lambda d: d.update(hybrid={"min_mn": -1}), ["hybrid.min_mn"]),
    (lambda d: d.update(hybrid={"min_rows": 1}), ["hybrid.'min_rows'"]),
    (lambda d: d.update(gemm_fp8=[]), ["'gemm_fp8'"]),
    (lambda d: d.update(small_k={"max_k": 5, "config": {}}), ["'small_k'", "default.json"]),
    (lambda d: d.update(schema=1), ["'schema'"]),
    (lambda d: d.pop("device"), ["'device'"]),
])
def test_validator_names_the_file_and_the_key(tmp_path, edit, words):
    doc = _doc()
    edit(doc)
    path = tmp_path / "h999.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(C.ConfigError) as info:
        C.load(path)
    for word in [str(path)] + words:
        assert word in str(info.value), (word, str(info.value))


def test_merge_levels_and_flush_k_ranges():
    # flush_k: what launch.flush_steps accepts -- 0 or a positive multiple of 16 (16 launches BLOCK_K 16).
    for ok in (0, 16, 32, 48, 64, 128, 4096):
        C.validate_config({"flush_k": ok})
    for bad in (8, 24, -16, True, 64.0, None):
        with pytest.raises(C.ConfigError, match="flush_k"):
            C.validate_config({"flush_k": bad})
    # merge_levels: a boolean; true only in the BF16 modes' table entries (the launcher ignores it elsewhere).
    for mode in ("bf16x9", "bf16x6"):
        C.validate_config({"merge_levels": True}, mode=mode)
    C.validate_config({"merge_levels": True})  # a config= override
    with pytest.raises(C.ConfigError, match="merge_levels"):
        C.validate_config({"merge_levels": True}, mode="termwise")
    with pytest.raises(C.ConfigError, match="merge_levels"):
        C.validate_config({"merge_levels": "yes"})


def test_config_argument_is_checked_by_the_same_validator():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from sgemm_cube.backends.cuda import launch

    with pytest.raises(C.ConfigError, match="config=.*BLOCK_M=100"):
        launch.resolve_config(1, 64, 64, 64, "cpu", config={"BLOCK_M": 100})
    with pytest.raises(C.ConfigError, match="flush_k argument"):
        launch.flush_steps(24, 64)
    assert launch.flush_steps(16, 64) == (16, 1)


def test_choose_takes_the_first_matching_entry_then_the_nearest_bucket():
    doc = {"device": "X", "gemm_termwise": [
        {"max_flops": 1e6, "config": {"BLOCK_M": 64}}, {"max_k": 500, "config": {"BLOCK_N": 32}}, {"config": {}},
        {"bucket": [1024, 1024, 1024], "config": {"num_stages": 4}},
        {"bucket": [4096, 4096, 4096], "config": {"num_stages": 5}}]}
    assert C.choose(doc, "termwise", 1, 10, 10, 10) == {"BLOCK_M": 64, "num_stages": 4}
    assert C.choose(doc, "termwise", 1, 1000, 1000, 400) == {"BLOCK_N": 32, "num_stages": 4}
    assert C.choose(doc, "termwise", 1, 3000, 3000, 3000) == {"num_stages": 5}
    assert C.choose(doc, "termwise", 1, 2048, 2048, 2048) == {"num_stages": 5}  # tie: the larger bucket
    assert C.choose(doc, "termwise", 1, 3000, 3000, 3000, device_name="Y") == {}  # measured on X only
    assert C.choose(doc, "elementwise", 1, 10, 10, 10) == {}


@pytest.fixture
def fake_gpus(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from sgemm_cube.backends.cuda import hybrid, launch

    monkeypatch.setenv("SGEMM_CUBE_TUNING_DIR", str(tmp_path / "no tables"))
    index = lambda d: d.index if isinstance(d, torch.device) else int(d)  # noqa: E731
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: GPUS[index(d)])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d=None: CAPABILITIES[index(d)])
    monkeypatch.setattr(launch, "interpreter_active", lambda: False)
    hybrid._cuda_key.cache_clear()
    launch._stored_config.cache_clear()
    yield launch, hybrid, torch
    hybrid._cuda_key.cache_clear()
    launch._stored_config.cache_clear()


def test_chosen_configs_are_those_of_before_the_move(fake_gpus):
    launch, hybrid, torch = fake_gpus
    for i, gpu in enumerate(GPUS):
        dev = torch.device("cuda", i)
        assert hybrid.native_rule(hybrid.device_key(dev)) == RULES[gpu], gpu
        for order, scheme in MODES:
            got = [launch.resolve_config(*shape, dev, order=order, scheme=scheme) for shape in SHAPES]
            want = [dict(zip(CONFIG_KEYS, CONFIGS["abcdefghijklmnopqrstuvwxyz".index(c)]))
                    for c in TODAY[gpu, order, scheme]]
            bad = [(s, g, w) for s, g, w in zip(SHAPES, got, want) if g != w]
            assert not bad, (gpu, order, scheme, bad[:3])


def test_chunked_planes_where_measured(fake_gpus):
    """Only the H200 chunks the split planes (its 16384^3 bucket, measured: docs/speed.md), for every size in
    (8192, 16384] of its termwise products, the device's ``"auto"`` choice included (it reads fp16x3's config)."""
    launch, hybrid, torch = fake_gpus
    chunks = lambda gpu, *shape, **kw: (lambda c: (c["row_chunks"], c["col_chunks"]))(  # noqa: E731
        launch.resolve_config(1, *shape, torch.device("cuda", GPUS.index(gpu)), **kw))
    assert chunks("NVIDIA H200", 16384, 16384, 16384) == (8, 2)
    assert chunks("NVIDIA H200", 12288, 12288, 12288) == (8, 2)
    assert chunks("NVIDIA H200", 8192, 8192, 8192) == (1, 1)
    assert chunks("NVIDIA H200", 16384, 16384, 16384, scheme="bf16x6") == (1, 1)
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-80GB"):
        assert chunks(gpu, 16384, 16384, 16384) == (1, 1), gpu


def test_interpreter_config_is_that_of_before_the_move(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from sgemm_cube.backends.cuda import launch

    monkeypatch.setattr(launch, "interpreter_active", lambda: True)
    assert launch.resolve_config(1, 5000, 5000, 5000, "cpu") == INTERPRETER


# ---- frozen before the move (one-off script, see the module's docstring) ---------------------------------------

CONFIG_KEYS = ('variant',
 'BLOCK_M',
 'BLOCK_N',
 'BLOCK_K',
 'GROUP_M',
 'num_warps',
 'num_stages',
 'split_corr',
 'warp_specialize',
 'split_block',
 'split_warps',
 'flush_k',
 'merge_levels',
 'row_chunks',
 'col_chunks',
 'fixup_apart')
#: Every distinct config chosen before the move to configs/*.json, in CONFIG_KEYS order; TODAY's letters index it.
CONFIGS = [('tma', 128, 128, 32, 8, 8, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('tma', 128, 128, 64, 8, 8, 3, False, False, None, 4, 64, False, 1, 1, False),
 ('tma', 64, 128, 32, 8, 8, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('tma', 64, 128, 64, 8, 8, 3, False, False, None, 4, 64, False, 1, 1, False),
 ('tma', 128, 64, 32, 8, 8, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('tma', 128, 64, 64, 8, 8, 3, False, False, None, 4, 64, False, 1, 1, False),
 ('ptr', 64, 128, 32, 8, 4, 4, False, False, None, 4, 32, False, 1, 1, False),
 ('ptr', 64, 128, 64, 8, 4, 4, False, False, None, 4, 64, False, 1, 1, False),
 ('ptr', 128, 128, 32, 8, 8, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('ptr', 128, 128, 64, 8, 8, 3, False, False, None, 4, 64, False, 1, 1, False),
 ('ptr', 64, 128, 32, 8, 8, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('ptr', 64, 128, 64, 8, 8, 3, False, False, None, 4, 64, False, 1, 1, False),
 ('ptr', 128, 64, 32, 8, 8, 2, False, False, None, 4, 32, False, 1, 1, False),
 ('ptr', 128, 64, 64, 8, 8, 2, False, False, None, 4, 64, False, 1, 1, False),
 ('tma', 64, 128, 32, 8, 4, 3, False, False, None, 4, 32, False, 1, 1, False),
 ('tma', 64, 128, 32, 8, 4, 4, False, False, None, 4, 32, False, 1, 1, False),
 ('tma', 64, 128, 32, 8, 4, 4, False, False, None, 4, 32, False, 1, 1, True),
 ('tma', 64, 128, 32, 8, 4, 3, False, False, None, 4, 32, False, 1, 1, True)]
#: (GPU name, order, scheme) -> the config letter of each shape of SHAPES, in order.
TODAY = {('NVIDIA H100 80GB HBM3', 'termwise', 'fp16x3'): 'ooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbb',
 ('NVIDIA H100 80GB HBM3', 'elementwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H100 80GB HBM3', 'termwise', 'fp16x4'): 'cccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccdddd',
 ('NVIDIA H100 80GB HBM3', 'elementwise', 'bf16x9'): 'eeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffff',
 ('NVIDIA H100 80GB HBM3', 'termwise', 'bf16x6'): 'oooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffff',
 ('NVIDIA H200', 'termwise', 'fp16x3'): 'ggggghhhhqqgggbbbbqqgggbbbbqqppabbbbggggghhhhqqgggbbbbqqgggbbbbqqppabbbb',
 ('NVIDIA H200', 'elementwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H200', 'termwise', 'fp16x4'): 'cccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccdddd',
 ('NVIDIA H200', 'elementwise', 'bf16x9'): 'eeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffff',
 ('NVIDIA H200', 'termwise', 'bf16x6'): 'rroooffffrroooffffrroooffffrroooffffrroooffffrroooffffrroooffffrroooffff',
 ('NVIDIA H800', 'termwise', 'fp16x3'): 'ooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbb',
 ('NVIDIA H800', 'elementwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H800', 'termwise', 'fp16x4'): 'cccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccdddd',
 ('NVIDIA H800', 'elementwise', 'bf16x9'): 'eeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffff',
 ('NVIDIA H800', 'termwise', 'bf16x6'): 'oooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffff',
 ('NVIDIA H20', 'termwise', 'fp16x3'): 'ooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbbooooobbbb',
 ('NVIDIA H20', 'elementwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H20', 'termwise', 'fp16x4'): 'cccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccdddd',
 ('NVIDIA H20', 'elementwise', 'bf16x9'): 'eeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffff',
 ('NVIDIA H20', 'termwise', 'bf16x6'): 'oooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffffoooooffff',
 ('NVIDIA A100-SXM4-80GB', 'termwise', 'fp16x3'): 'iiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjj',
 ('NVIDIA A100-SXM4-80GB', 'elementwise', 'fp16x3'): 'iiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjj',
 ('NVIDIA A100-SXM4-80GB', 'termwise', 'fp16x4'): 'kkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllll',
 ('NVIDIA A100-SXM4-80GB', 'elementwise', 'bf16x9'): 'mmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnn',
 ('NVIDIA A100-SXM4-80GB', 'termwise', 'bf16x6'): 'mmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnn',
 ('NVIDIA GeForce RTX 4090', 'termwise', 'fp16x3'): 'iiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjj',
 ('NVIDIA GeForce RTX 4090', 'elementwise', 'fp16x3'): 'iiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjjiiiiijjjj',
 ('NVIDIA GeForce RTX 4090', 'termwise', 'fp16x4'): 'kkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllllkkkkkllll',
 ('NVIDIA GeForce RTX 4090', 'elementwise', 'bf16x9'): 'mmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnn',
 ('NVIDIA GeForce RTX 4090', 'termwise', 'bf16x6'): 'mmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnnmmmmmnnnn',
 ('NVIDIA H200 NVL', 'termwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H200 NVL', 'elementwise', 'fp16x3'): 'aaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbbaaaaabbbb',
 ('NVIDIA H200 NVL', 'termwise', 'fp16x4'): 'cccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccddddcccccdddd',
 ('NVIDIA H200 NVL', 'elementwise', 'bf16x9'): 'eeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffffeeeeeffff',
 ('NVIDIA H200 NVL', 'termwise', 'bf16x6'): 'rroooffffrroooffffrroooffffrroooffffrroooffffrroooffffrroooffffrroooffff'}
#: native_rule per GPU name.
RULES = {'NVIDIA H100 80GB HBM3': {'min_flops': 5000000000.0,
                           'min_flops_per_matrix': 1000000000.0,
                           'min_mn': 256,
                           'min_k': 128,
                           'min_tiles': 128},
 'NVIDIA H200': {'min_flops': 5000000000.0,
                 'min_flops_per_matrix': 1000000000.0,
                 'min_mn': 256,
                 'min_k': 0,
                 'min_tiles': 128},
 'NVIDIA H800': {'min_flops': 5000000000.0,
                 'min_flops_per_matrix': 1000000000.0,
                 'min_mn': 256,
                 'min_k': 128,
                 'min_tiles': 128},
 'NVIDIA H20': {'min_flops': 5000000000.0,
                'min_flops_per_matrix': 1000000000.0,
                'min_mn': 256,
                'min_k': 128,
                'min_tiles': 128},
 'NVIDIA A100-SXM4-80GB': {'min_flops': 5000000000.0,
                           'min_flops_per_matrix': 1000000000.0,
                           'min_mn': 256,
                           'min_k': 256,
                           'min_tiles': 128},
 'NVIDIA GeForce RTX 4090': {'min_flops': 5000000000.0,
                             'min_flops_per_matrix': 1000000000.0,
                             'min_mn': 256,
                             'min_k': 256,
                             'min_tiles': 128},
 'NVIDIA H200 NVL': {'min_flops': 5000000000.0,
                     'min_flops_per_matrix': 1000000000.0,
                     'min_mn': 256,
                     'min_k': 0,
                     'min_tiles': 128}}
#: resolve_config under TRITON_INTERPRET=1.
INTERPRETER = {'variant': 'ptr',
 'BLOCK_M': 32,
 'BLOCK_N': 32,
 'BLOCK_K': 16,
 'GROUP_M': 2,
 'num_warps': 4,
 'num_stages': 1,
 'split_corr': False,
 'warp_specialize': False,
 'split_block': None,
 'split_warps': 4,
 'flush_k': 64,
 'merge_levels': False,
 'row_chunks': 1,
 'col_chunks': 1,
 'fixup_apart': False}
