"""pytest modules of the AscendC kernels (``ascendc_kernels/``): the device sources' g++ syntax check, the
schedule header, the host glue's compile, the kernels executed on the host (``executed.py``) against the
models, planted bugs, the bring-up's dry run.

What these modules build and run lives beside the kernels, in ``ascendc_kernels/tests/``: the C++
stand-ins (``mock_ascendc/``, ``exec_ascendc/``), the g++ drivers and misuse sources, and
``check_on_npu.py``, which the bring-up runs on an Ascend host without this test suite.  That folder holds
no pytest module; this one holds no C++ (``ascendc_kernels/README.md``, "Layout").
"""
